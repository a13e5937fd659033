import time

from worker_sdk import WorkQueue


def test_an_item_held_past_its_lease_timeout_is_not_given_to_another_worker(sdk_env, live_api):
    queue = WorkQueue(["/slow", "/other"], shuffle=False, lease_timeout=1, worker="holder")
    other = WorkQueue(["/slow", "/other"], shuffle=False, lease_timeout=1, worker="other")
    with queue.lease() as item:
        assert item == "/slow"
        time.sleep(2.5)  # 2.5 lease timeouts: only the heartbeat keeps the lease
        # The other worker gets the second item, not the held one.
        with other.lease() as second:
            assert second == "/other"
    rows = {r["item"]: r for r in live_api("viewer").get(f"/api/v1/jobs/{queue.job['id']}/items/").json()["results"]}
    assert (rows["/slow"]["state"], rows["/slow"]["worker"], rows["/slow"]["attempts"]) == ("done", "holder", 1)
