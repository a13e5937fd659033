"""An agreed epoch's loader process that runs out first leaves the items it handed over to the rank.

A DataLoader tells a loader process to exit as soon as it hears that the
process's records ran out, while batches that process read may still wait
in the DataLoader behind a slower sibling's (batches come in order). The
rank trains on those and completes their items afterwards: the loader's
exit must neither give them back (they would be read a second time, and
the rank's completion refused) nor let them expire with its heartbeat.
Found by bench/ddp_sync.py: "completion refused: lease lost" for items the
rank had trained on whole, with 2 loader processes per rank.
"""

import collections
import time

import pytest
from torch.utils.data import get_worker_info

from worker_sdk import WorkQueue, readers
from worker_sdk.torch import SyncLoader

pytestmark = pytest.mark.timeout(120)


def slow_first_loader(item):
    """Loader 0 reads slowly, so that loader 1 runs out while its batches wait behind loader 0's."""
    slow = get_worker_info().id == 0
    for record in readers.records(item):
        if slow:
            time.sleep(0.02)  # loader 0's slow read: the condition under test
        yield record


def test_items_a_finished_loader_handed_over_are_completed_once(sdk_env, tmp_path):
    works = []
    for f in range(8):
        path = tmp_path / f"part-{f}.csv"
        path.write_text("".join(f"{f},{j}\n" for j in range(12)))
        works.append(str(path))
    queue = WorkQueue(works, shuffle=False, name="agreed-loaders", lease_timeout=60)
    loader = SyncLoader(
        queue, batch_size=4, reader=slow_first_loader, num_workers=2, collate_fn=list, multiprocessing_context="fork"
    )
    trained = collections.Counter(record for batch in loader for record in batch)
    assert trained == collections.Counter(f"{f},{j}".encode() for f in range(8) for j in range(12))
    assert (loader.stats.released, loader.stats.reread) == (0, 0)
    marks = queue.watermarks()
    # Every item completed by the rank; none given back by the loader that ended first.
    assert (marks["done"], marks["leased"], marks["pending"]) == (8, 0, 0)
    queue.close()
