import pytest

from .helpers import create_job, restore, snapshot, states, take_and_complete

pytestmark = pytest.mark.django_db


def test_restoring_an_older_snapshot_after_a_newer_one_rolls_back_further(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(10)], shuffle=False)
    first_two = take_and_complete(worker_client, job["id"], 2)
    older = snapshot(worker_client, job["id"])
    take_and_complete(worker_client, job["id"], 3)
    newer = snapshot(worker_client, job["id"])
    take_and_complete(worker_client, job["id"], 1)

    assert restore(worker_client, job["id"], newer["id"])["reopened"] == 1
    assert list(states(job["id"]).values()).count("done") == 5
    back = restore(worker_client, job["id"], older["id"])
    assert back["reopened"] == 3 and not back["repeated"]
    assert {i for i, s in states(job["id"]).items() if s == "done"} == {lease["id"] for lease in first_two}


def test_restoring_the_newer_snapshot_again_after_the_older_one_reopens_what_was_completed_since(
    worker_client, job_name
):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(10)], shuffle=False)
    take_and_complete(worker_client, job["id"], 2)
    older = snapshot(worker_client, job["id"])
    take_and_complete(worker_client, job["id"], 3)
    newer = snapshot(worker_client, job["id"])
    restore(worker_client, job["id"], older["id"])
    take_and_complete(worker_client, job["id"], 4)
    # Completions after the older restore have sequence numbers above the newer snapshot's.
    assert restore(worker_client, job["id"], newer["id"])["reopened"] == 4
    assert list(states(job["id"]).values()).count("done") == 2
