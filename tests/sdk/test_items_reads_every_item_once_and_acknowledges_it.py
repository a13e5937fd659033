import pytest

from worker_sdk import AuthError, JobSpecConflictError, QueueExhausted, WorkQueue


def test_items_yields_every_item_of_every_epoch_and_completes_them(sdk_env):
    queue = WorkQueue([f"/d/{i}" for i in range(5)], num_epochs=3, shuffle=False)
    assert list(queue.items()) == [f"/d/{i}" for i in range(5)] * 3
    marks = queue.watermarks()
    assert (marks["state"], marks["done"], marks["leased"], marks["pending"]) == ("done", 15, 0, 0)


def test_an_item_is_completed_only_when_the_next_is_asked_for(sdk_env):
    # Without a look-ahead; with one, test_items_takes_the_next_item_ahead_...
    queue = WorkQueue(["/a", "/b", "/c"], shuffle=False, look_ahead=0)
    iterator = queue.items()
    assert next(iterator) == "/a"
    assert (queue.watermarks()["done"], queue.watermarks()["leased"]) == (0, 1)
    assert next(iterator) == "/b"
    assert (queue.watermarks()["done"], queue.watermarks()["leased"]) == (1, 1)
    # Closing the loop in the middle gives the item in hand back (and leaves no lease heartbeating).
    iterator.close()
    assert (queue.watermarks()["done"], queue.watermarks()["leased"], queue.watermarks()["pending"]) == (1, 0, 2)


def test_leaving_the_loop_early_gives_the_item_back(sdk_env):
    queue = WorkQueue(["/a", "/b"], shuffle=False)
    for item in queue.items():
        break
    marks = queue.watermarks()
    assert (marks["done"], marks["leased"], marks["pending"]) == (0, 0, 2)
    assert list(queue.items()) == ["/a", "/b"]


def test_lease_context_completes_on_success_and_fails_on_error(sdk_env, live_api):
    queue = WorkQueue(["/a", "/b"], shuffle=False, max_attempts=2)
    with queue.lease() as item:
        assert item == "/a"
    with pytest.raises(RuntimeError):
        with queue.lease() as item:
            raise RuntimeError("corrupt record at offset 12")
    audit = live_api("viewer").get(f"/api/v1/jobs/{queue.job['id']}/items/").json()["results"]
    by_item = {row["item"]: row for row in audit}
    assert by_item["/a"]["state"] == "done"
    assert by_item["/b"]["state"] == "pending" and by_item["/b"]["error"] == "RuntimeError: corrupt record at offset 12"
    with queue.lease() as item:
        assert item == "/b"
    with pytest.raises(QueueExhausted):
        with queue.lease():
            pass


def test_every_worker_of_a_run_attaches_to_the_same_job(sdk_env):
    first = WorkQueue(["/a", "/b"], seed=3)
    second = WorkQueue(["/a", "/b"], seed=3)
    assert first.job["id"] == second.job["id"]


def test_a_different_spec_under_the_same_name_says_how_to_separate_runs(sdk_env):
    WorkQueue(["/a"]).job
    with pytest.raises(JobSpecConflictError) as raised:
        WorkQueue(["/other"]).job
    assert raised.value.fields == ["works"] and "SHARDLINE_RUN" in str(raised.value)


def test_attaching_to_a_finished_job_warns_how_to_start_a_new_run(sdk_env):
    assert list(WorkQueue(["/a"]).items()) == ["/a"]
    with pytest.warns(RuntimeWarning, match="SHARDLINE_RUN"):
        again = WorkQueue(["/a"])
        assert list(again.items()) == []


def test_a_viewer_token_cannot_lease(sdk_env, live_keys):
    queue = WorkQueue(["/a"], token=live_keys["viewer"])
    with pytest.raises(AuthError) as raised:
        list(queue.items())
    assert raised.value.status == 403


def test_the_job_of_a_run_keeps_its_queue_and_run_as_fields(sdk_env):
    queue = WorkQueue(["/a"], name="ctr.v2")
    job = queue.job
    # The queue's name may hold dots: the run is what SHARDLINE_RUN said, never read back from the name.
    assert (job["queue"], job["run"]) == ("ctr.v2", sdk_env["SHARDLINE_RUN"])
    assert job["name"] == queue.job_name == f"ctr.v2.{sdk_env['SHARDLINE_RUN']}"
