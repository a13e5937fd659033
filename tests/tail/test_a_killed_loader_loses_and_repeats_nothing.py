"""A WorkQueueLoader's loader process SIGKILLed mid-read: what the loop received stays read, the rest goes back.

The loop's process claims what it receives (worker_sdk.receipts), so it
knows how far the dead loader's range was trained on. The DataLoader stops
the loop with its error for the dead loader; as the loop's iterator goes,
the dead loader's lease is cut there and completed, and the rest of the
range is a new item that a finisher reads. Left to the server, the item
would go back from the position the loader's heartbeat last reported, and
the records received since would be read twice.
"""

import os
import signal
from collections import Counter

import pytest

from server.models import Item, ItemState
from tests.support import wait_until

from .harness import Lines, check_exactly_once, one_slice_apart, start_reader

pytestmark = pytest.mark.timeout(150)

LINES = 600


def test_a_loader_killed_mid_read_loses_and_repeats_nothing(sdk_env, celery_worker, tmp_path):
    works, queue, barriers = one_slice_apart(tmp_path, sdk_env, "killed-loader", LINES, "victim", "finisher")
    name = queue.name
    victim = Lines(start_reader(sdk_env, "loader", name, 1, 0.02, "victim", works, barriers[0], 1))
    wait_until(lambda: len(victim.read) >= 50 or victim.child.poll() is not None, 60, 0.05, "the victim to read")
    held = Item.objects.get(job_id=queue.job["id"], state=ItemState.LEASED)
    assert ":loader" in held.worker, held.worker  # victim:loader<N>:<pid>
    os.kill(int(held.worker.rsplit(":", 1)[1]), signal.SIGKILL)
    code = victim.wait(60)
    assert code != 0, "the loop went on after its loader died"
    assert "exited unexpectedly" in "".join(victim.errors) or "killed by signal" in "".join(victim.errors)
    marks = queue.watermarks()
    assert marks["leased"] == 0 and marks["done"] == 1 and marks["pending"] == 1, marks

    finisher = Lines(start_reader(sdk_env, "ranges", name, 1, 0.0, "finisher", works, barriers[1], 1))
    assert finisher.ended_well(90)
    check_exactly_once(works, Counter(victim.read + finisher.read))
    assert queue._client.job(queue.job["id"])["state"] == "done"
