"""A take that waits for a split asked for it runs again once the request can have gone stale.

The gateway parks a waiting take and, until something it waits for is
announced, answers its repeats from its first answer. A split request that
its holder never answers (a reader that no longer tracks the range, a
holder's SDK that missed it) announces nothing: the take waited on it until
a lease expired, however long the holder kept heartbeating. Now its wait
ends when the request goes stale (services/splits.py, STALE_REQUEST), and
the take asks again (a new request: the holder is told again, or another
holder is asked).
"""

import threading
import time
import uuid

from server.models import Item
from server.services import splits
from tests.support import wait_until


def asked_at(item_id: int):
    return Item.objects.filter(id=item_id).values_list("split_asked_at", flat=True).first()


def test_a_take_waiting_for_a_split_asks_again_when_its_request_goes_stale(live_api):
    worker = live_api("worker")
    job = worker.post("/api/v1/jobs/", {"name": f"stale-{uuid.uuid4().hex[:8]}", "works": ["/f.csv?start=0&end=1000"]})
    assert job.status_code == 201, job.text
    leases = f"/api/v1/jobs/{job.json()['id']}/leases/"
    # A holder that tracks its reading, and never heartbeats or answers.
    held = worker.post(leases, {"worker": "holder", "tracks": True}).json()["leases"][0]
    answers = []
    idle = threading.Thread(
        target=lambda: answers.append(worker.post(leases, {"worker": "idle", "wait": 10})), daemon=True
    )
    began = time.monotonic()
    idle.start()
    first = wait_until(lambda: asked_at(held["id"]), 5, 0.05, "the split asked for the idle worker")
    again = wait_until(
        lambda: (at := asked_at(held["id"])) is not None and at > first and at,
        3 * splits.STALE_REQUEST,
        0.05,
        "the split asked again, while the idle worker's take still waits",
    )
    assert idle.is_alive() and time.monotonic() - began < 10
    assert (again - first).total_seconds() >= splits.STALE_REQUEST
    idle.join(20)
    assert answers and answers[0].status_code == 200 and answers[0].json()["leases"] == []
