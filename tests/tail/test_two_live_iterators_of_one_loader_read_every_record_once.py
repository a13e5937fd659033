"""Two live iterators of one WorkQueueLoader, read in turn: each pass has its loaders' board and turns, every record once.

Each iterator of a DataLoader without persistent loaders starts loader
processes of its own. Before, both passes shared the loader's board and
turns: the second pass's start wiped what the first's loaders had noted,
and when one pass ended the other's loaders took it for the loop's close.
"""

from collections import Counter

import pytest

from .harness import Lines, check_exactly_once, one_slice_apart, start_reader

pytestmark = pytest.mark.timeout(150)


@pytest.mark.parametrize("shape", ["loader", "loader-batches"])
def test_two_live_iterators_read_every_record_once(shape, sdk_env, celery_worker, tmp_path):
    works, queue, barriers = one_slice_apart(tmp_path, sdk_env, f"two-passes-{shape}", 400, "reader")
    reader = Lines(start_reader(sdk_env, shape, queue.name, 1, 0.002, "reader", works, barriers[0], 1, iterators=2))
    assert reader.ended_well(90)
    check_exactly_once(works, Counter(reader.read))
    assert queue._client.job(queue.job["id"])["state"] == "done"
