"""PyTorch: an IterableDataset over a WorkQueue.

With ``DataLoader(num_workers=N)`` every loader process leases its own items
(under its own worker name), so fast loaders read more, exactly as workers of
a training job do. Items are completed when their records are exhausted.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from .queue import QueueExhausted, WorkQueue, default_worker_name

try:
    from torch.utils.data import IterableDataset, get_worker_info
except ImportError as exc:
    raise ImportError(f"worker_sdk.torch needs PyTorch: pip install torch ({exc})") from exc


class WorkQueueDataset(IterableDataset):
    """Yields ``reader(item)``'s records for every item this process leases (the items themselves without a reader).

    ``reader`` must be picklable for ``num_workers > 0`` (a module-level
    function). An exception from the reader fails the item, so another
    attempt reads it, and then propagates.
    """

    def __init__(self, queue: WorkQueue, reader: Callable[[str], Iterable] | None = None):
        self.queue = queue
        self.reader = reader

    def __iter__(self) -> Iterator:
        info = get_worker_info()
        if info is not None and self.queue.worker is None:
            # Loader processes are forked or spawned copies of the queue: each
            # leases under its own name, with the loader index in the audit.
            self.queue.worker = f"{default_worker_name()}:loader{info.id}"
        if self.reader is None:
            yield from self.queue.items()
            return
        while True:
            try:
                with self.queue.lease() as item:
                    yield from self.reader(item)
            except QueueExhausted:
                return
