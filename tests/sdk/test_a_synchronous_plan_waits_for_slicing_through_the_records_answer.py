"""A synchronous epoch's plan waits for the job's slicing through the records answer alone (one request per look).

Every rank waits for the plan at each epoch's start, so the plan asks one
question: the records answer says whether the job is still being sliced
(or was paused while slicing), and the plan asks again until it is not.
"""

import pytest

from worker_sdk import WorkQueue, sync

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def set_state(test_database_url):
    """Sets a job's state as slicing and pausing leave it, committed on a connection of its own (the server sees it)."""
    import psycopg

    def set_state(job_id: int, state: str, resume_state: str = "") -> None:
        with psycopg.connect(test_database_url, autocommit=True) as connection:
            changed = connection.execute(
                "UPDATE shardline_job SET state = %s, resume_state = %s WHERE id = %s", (state, resume_state, job_id)
            ).rowcount
        assert changed == 1

    return set_state


@pytest.fixture
def queue(sdk_env, tmp_path):
    path = tmp_path / "part-0.csv"
    path.write_text("".join(f"{j}\n" for j in range(10)))
    queue = WorkQueue([f"{path}?start=0&end=10"], name="plan-while-slicing", worker="rank0")
    yield queue
    queue.close()


def test_a_plan_asked_while_the_job_is_paused_in_slicing_waits_until_it_is_sliced(queue, set_state):
    job_id = queue.job["id"]
    set_state(job_id, "paused", "slicing")
    answers = []
    ask = queue.epoch_records

    def epoch_records(upto_epoch):
        answer = ask(upto_epoch)
        answers.append(answer["slicing"])
        if answer["slicing"]:
            set_state(job_id, "ready")  # slicing ends after the first look
        return answer

    queue.epoch_records = epoch_records
    plan = sync.plan(queue, 0, batch_size=2, world_size=1)
    assert answers == [True, False]
    assert (plan.unread, plan.steps) == (10, 5)


def test_a_job_still_slicing_past_the_timeout_is_a_clear_error(queue, set_state):
    set_state(queue.job["id"], "slicing")
    with pytest.raises(TimeoutError, match="plan-while-slicing: the job was still slicing after 0 s"):
        sync.sliced_counts(queue, 0, timeout=0)
