from datetime import datetime, timezone

from tests.support import wait_until
from worker_sdk import WorkQueue


def test_an_item_held_past_its_lease_timeout_is_not_given_to_another_worker(sdk_env, live_api):
    queue = WorkQueue(["/slow", "/other"], shuffle=False, lease_timeout=1, worker="holder")
    other = WorkQueue(["/slow", "/other"], shuffle=False, lease_timeout=1, worker="other")
    viewer = live_api("viewer")

    def slow_row() -> dict:
        rows = viewer.get(f"/api/v1/jobs/{queue.job['id']}/items/").json()["results"]
        return next(r for r in rows if r["item"] == "/slow")

    with queue.lease() as item:
        assert item == "/slow"
        first_expiry = datetime.fromisoformat(slow_row()["expires_at"])
        expiries = {first_expiry}

        def held_past_its_first_expiry() -> bool:
            # Only the heartbeat moves the expiry on: two moves and a first
            # expiry in the past mean the lease outlived its timeout.
            expiries.add(datetime.fromisoformat(slow_row()["expires_at"]))
            return len(expiries) >= 3 and datetime.now(timezone.utc) > first_expiry

        wait_until(held_past_its_first_expiry, 20, 0.1, "two heartbeats past the lease's first expiry")
        # The other worker gets the second item, not the held one.
        with other.lease() as second:
            assert second == "/other"
    row = slow_row()
    assert (row["state"], row["worker"], row["attempts"]) == ("done", "holder", 1)
