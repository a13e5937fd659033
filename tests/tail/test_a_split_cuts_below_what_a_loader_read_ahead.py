"""A split cuts below the records a WorkQueueLoader's loaders read ahead: they are dropped, and another worker reads them.

A slow training loop (20 ms a record) reads one slice through a
WorkQueueLoader whose loaders read ahead of it; a fast reader comes later
and has the slow loop's range split for it, again and again as it runs out.
The loaders print every record they produce. Records they produced that the
slow loop never received were cut off below what they read, and the fast
reader read each of them: every record once. When loaders claimed what they
produced, no split could cut below it.
"""

from collections import Counter

import pytest

from tests.support import wait_until

from .harness import Lines, check_exactly_once, one_slice_apart, start_reader

pytestmark = pytest.mark.timeout(150)

LINES = 600


def test_a_split_cuts_below_the_records_a_loader_read_ahead(sdk_env, celery_worker, tmp_path):
    works, queue, barriers = one_slice_apart(tmp_path, sdk_env, "ahead", LINES, "slow", "fast")
    name = queue.name
    slow = Lines(start_reader(sdk_env, "loader", name, 1, 0.02, "slow", works, barriers[0], 1, say_produced=True))
    wait_until(lambda: len(slow.read) >= 20 or slow.child.poll() is not None, 60, 0.05, "the slow loop to start")
    fast = Lines(start_reader(sdk_env, "ranges", name, 1, 0.0, "fast", works, barriers[1], 1))
    assert fast.ended_well(90) and slow.ended_well(90)

    check_exactly_once(works, Counter(slow.read + fast.read))
    dropped = set(slow.produced) - set(slow.read)
    assert dropped, (
        f"no split cut below what the slow loop's loaders read ahead (produced {len(slow.produced)}, "
        f"received {len(slow.read)})"
    )
    assert dropped <= set(fast.read)
    job = queue._client.job(queue.job["id"])
    assert job["state"] == "done" and job["splits"] >= 1, job
