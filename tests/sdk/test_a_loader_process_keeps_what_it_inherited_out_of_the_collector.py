"""A forked loader process of the SDK's datasets freezes what it inherited out of the garbage collector (gc.freeze).

A full collection in a loader forked from a training process walks the
whole inherited heap (PyTorch's included) unless it is frozen, and a
DataLoader joins its loaders at every pass's end, so the loop waited for
that walk (bench/RESULTS.md). Each reader below yields, for its item, how
many objects its process holds frozen: with loader processes that is about
everything the training process held when they forked; with
``gc_freeze=False``, or without loader processes, nothing. The training
process itself is never frozen.
"""

import gc

import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is an optional dependency of the SDK tests (pip install torch==2.13.0)"
)

pytestmark = pytest.mark.timeout(120)

ITEMS = [f"/frozen/{i}" for i in range(6)]
# Forked loaders inherit the training process's heap (the default start
# method on Linux before Python 3.14, whose default is forkserver).
FORK = {"multiprocessing_context": "fork"}


def frozen_count(item: str):
    yield gc.get_freeze_count()


def counts(batches) -> list[int]:
    return [
        int(count) for batch in batches for count in (batch if isinstance(batch, (list, torch.Tensor)) else [batch])
    ]


@pytest.fixture
def inherited():
    """What the training process holds as its loaders fork (its collector's objects), none of it frozen."""
    assert gc.get_freeze_count() == 0
    yield len(gc.get_objects())
    assert gc.get_freeze_count() == 0, "the training process froze its own heap"


@pytest.mark.parametrize("loader", ["DataLoader", "WorkQueueLoader"])
def test_each_loader_process_freezes_what_it_inherited(sdk_env, inherited, loader):
    from torch.utils.data import DataLoader

    from worker_sdk import WorkQueue
    from worker_sdk.torch import WorkQueueDataset, WorkQueueLoader

    queue = WorkQueue(ITEMS, name=f"frozen_{loader}")
    kind = DataLoader if loader == "DataLoader" else WorkQueueLoader
    found = counts(kind(WorkQueueDataset(queue, reader=frozen_count), batch_size=2, num_workers=2, **FORK))
    assert len(found) == len(ITEMS)
    assert min(found) >= 0.9 * inherited, (found, inherited)


def test_a_sync_loaders_processes_freeze_what_they_inherited(sdk_env, inherited):
    from worker_sdk import WorkQueue
    from worker_sdk.torch import SyncLoader

    queue = WorkQueue(ITEMS, name="frozen_sync")
    found = counts(SyncLoader(queue, batch_size=2, reader=frozen_count, num_workers=2, **FORK))
    assert len(found) == len(ITEMS)
    assert min(found) >= 0.9 * inherited, (found, inherited)


def test_gc_freeze_false_leaves_the_loaders_collector_as_it_was(sdk_env, inherited):
    from torch.utils.data import DataLoader

    from worker_sdk import WorkQueue
    from worker_sdk.torch import SyncLoader, WorkQueueDataset

    queue = WorkQueue(ITEMS, name="frozen_off")
    found = counts(
        DataLoader(WorkQueueDataset(queue, reader=frozen_count, gc_freeze=False), batch_size=2, num_workers=2, **FORK)
    )
    synced = WorkQueue(ITEMS, name="frozen_off_sync")
    found += counts(SyncLoader(synced, batch_size=2, reader=frozen_count, num_workers=2, gc_freeze=False, **FORK))
    assert found == [0] * (2 * len(ITEMS))


def test_without_loader_processes_nothing_is_frozen(sdk_env, inherited):
    from torch.utils.data import DataLoader

    from worker_sdk import WorkQueue
    from worker_sdk.torch import WorkQueueDataset

    queue = WorkQueue(ITEMS, name="frozen_none")
    assert counts(DataLoader(WorkQueueDataset(queue, reader=frozen_count), batch_size=2)) == [0] * len(ITEMS)
