"""A WorkQueueLoader with drop_last: the records of each loader's last batch, dropped unless full, go back to the queue.

With ``drop_last=True`` torch drops a loader's last batch when it is not
full, and never hands it to the loop. Those records were read ahead by the
loader but never received, so they are not read: each range they belong to
ends before them, and the rest is a new item that a finisher reads. Every
record once, none lost to the drop.
"""

from collections import Counter

import pytest

from .harness import Lines, check_exactly_once, one_slice_apart, start_reader

pytestmark = pytest.mark.timeout(150)

LINES = 301  # one slice: batches of 8 leave a last batch of 5, dropped


def test_the_records_of_a_dropped_last_batch_go_back(sdk_env, celery_worker, tmp_path):
    works, queue, barriers = one_slice_apart(tmp_path, sdk_env, "drop-last", LINES, "dropper", "finisher")
    dropper = Lines(
        start_reader(sdk_env, "loader-batches", queue.name, 1, 0.0, "dropper", works, barriers[0], 1, drop_last=True)
    )
    assert dropper.ended_well(90)
    assert len(dropper.read) % 8 == 0 and len(dropper.read) < LINES
    marks = queue.watermarks()
    assert marks["leased"] == 0 and marks["pending"] >= 1, marks

    finisher = Lines(start_reader(sdk_env, "ranges", queue.name, 1, 0.0, "finisher", works, barriers[1], 1))
    assert finisher.ended_well(90)
    assert len(finisher.read) == LINES - len(dropper.read)
    check_exactly_once(works, Counter(dropper.read + finisher.read))
    assert queue._client.job(queue.job["id"])["state"] == "done"
