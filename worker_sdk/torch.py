"""PyTorch: an IterableDataset over a WorkQueue; SyncLoader and QueueState for synchronous (DDP) training.

With ``DataLoader(num_workers=N)`` every loader process leases its own items
(under its own worker name), so fast loaders read more, exactly as workers of
a training job do. They lease on behalf of the main process (the consumer of
what they read), which lets the server see that a loader waiting at the end
of the queue must not wait for its siblings: the DataLoader asks its loaders
for elements in turn, so a sibling that holds an item may only be asked
again once the waiting loader has returned. So in a DataLoader without
``WorkQueueLoader``'s turns (a plain one), a loader that has read a lease
in the pass and finds nothing more at the tail of the job (nothing pending,
only leases held) while a sibling still reads leaves the pass instead of
waiting, and the DataLoader goes on with the loaders that read
(worker_sdk.loader_siblings); the last one reading waits for the end.

With ``WorkQueueLoader`` and loader processes, a record read through
``reader`` counts as read when the training loop's process receives its
batch (worker_sdk.receipts): loaders read ahead, a split may cut below what
they read, and the batches past the cut are dropped, never delivered; an
item is acknowledged once the loop received it whole, and a loop that stops
mid-range gives back only what it did not receive. Otherwise an item read
through ``reader`` is acknowledged when the reader is done with it, before
its last record is handed on (with ``num_workers=0``, by the take that
leases the next item ahead, not a request of the loop's thread); without a
reader, a loader process
acknowledges each item as it hands it to the main process (the main process
itself, with ``num_workers=0``, when it asks for the next item).

A loader that finds nothing to lease waits on the server (for a split, or
at the end of the job): ``WorkQueueLoader`` takes batches as they are read,
so that wait does not hold up its siblings' batches. Its loaders take in
turn (worker_sdk.turns): one at a time, and while a sibling reads only once
the training loop has waited for data, so a process holds one item while one
loader keeps its loop fed, and its idle loaders ask no one for splits.

The loop's data stall (worker_sdk.stall) is its wait for the next batch,
counted in the main process by ``WorkQueueLoader`` (a plain DataLoader with
``num_workers > 0`` gives nothing to count it with) and sent by the loaders.
"""

from __future__ import annotations

import multiprocessing
import os
from contextlib import closing
from typing import Callable, Iterable, Iterator

from . import lease_records, loader_board, loader_process, loader_receipts, loader_siblings, look_ahead, receipts, stall
from .names import default_worker_name
from .queue import WorkQueue

# Imported with this module, before a script's init_process_group (worker_sdk.collectives says why).
from .torch_state import QueueState
from .torch_sync import SyncLoader
from .turns import LoaderTurns

__all__ = ["QueueState", "SyncLoader", "WorkQueueDataset", "WorkQueueLoader"]

try:
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info
except ImportError as exc:
    raise ImportError(f"worker_sdk.torch needs PyTorch: pip install torch ({exc})") from exc


class WorkQueueDataset(IterableDataset):
    """Yields ``reader(item)``'s records for every item this process leases (the items themselves without a reader).

    ``reader`` must be picklable for ``num_workers > 0`` (a module-level
    function). An exception from the reader fails the item, so another
    attempt reads it, and then propagates.

    Each loader process freezes what it holds as it starts (a forked one:
    what it inherited) out of the garbage collector's reach
    (worker_sdk.loader_process); ``gc_freeze=False`` leaves it to it.
    """

    def __init__(self, queue: WorkQueue, reader: Callable[[str], Iterable] | None = None, *, gc_freeze: bool = True):
        self.queue = queue
        self.reader = reader
        self.gc_freeze = gc_freeze
        # Built in the main process: the name its loader processes lease for.
        self.consumer = queue.consumer or queue.worker or default_worker_name()
        # The main process's data-stall clock, when a WorkQueueLoader counts
        # the loop's waits (and its loader processes send them).
        self.stall: stall.Clock | None = None
        # The loaders' turns to take, when a WorkQueueLoader reads batches in
        # the order they are read (worker_sdk.turns).
        self.turns: LoaderTurns | None = None
        # Where the loop's process claims what it received, when a
        # WorkQueueLoader has loader processes (worker_sdk.receipts), and
        # whether it collates lists of records.
        self.board: loader_board.Board | None = None
        self.batched = self.drop_last = False
        # Which loaders of a DataLoader in order read a lease now, so that an
        # idle one leaves at the tail (worker_sdk.loader_siblings): made here,
        # in the main process, before any loader starts.
        self.siblings = loader_siblings.Siblings()

    def __iter__(self) -> Iterator:
        info = get_worker_info()
        in_loader = info is not None
        if in_loader:
            if self.gc_freeze:
                loader_process.freeze_inherited()
            # Loader processes are forked or spawned copies of the queue: each
            # leases under its own name, for the main process.
            self.queue.worker = f"{self.consumer}:loader{info.id}:{os.getpid()}"
            self.queue.consumer = self.consumer
            if self.stall is not None:
                stall.adopt(self.queue.job["id"], self.consumer, self.stall)
        # In the loop's own process the next item is taken ahead while the
        # loop trains on this one (WorkQueue's look_ahead): item strings, or
        # record ranges read through ``reader``, whose completion then rides
        # the take ahead instead of a request of its own on the loop's thread.
        depth = 0 if in_loader else self.queue.look_ahead
        if in_loader and self.board is not None and self.reader is not None:
            # The loop's process claims what it receives: a lease is
            # acknowledged once received whole (worker_sdk.receipts).
            stream = self.queue.consumers.stream(lag=None, tracks=True)
            self.board.started(info.id)
            loader = loader_receipts.LoaderReceipts(self.board, info.id, stream, self.batched, self.drop_last)
            loader_receipts.adopt(loader)
            return self._read(stream, in_loader, depth, loader)
        tracks = self.reader is not None
        stream = (
            self.queue.consumers.loop_stream(tracks) if not in_loader else self.queue.consumers.stream(tracks=tracks)
        )
        if in_loader or self.stall is not None:
            return self._read(stream, in_loader, depth)
        # The loop's own process reads (num_workers=0): its waits for records
        # are its data stall (the batch's collation counts as its work).
        return stall.timed(self._read(stream, in_loader, depth), stream.meter)

    def _read(
        self, stream, in_loader: bool, depth: int, loader: loader_receipts.LoaderReceipts | None = None
    ) -> Iterator:
        turns = self.turns if in_loader else None
        if turns is not None:
            leases = turns.leases(stream)
        else:
            leases = look_ahead.leases(stream, depth, most=self.queue.look_ahead_most)
        sibling = None
        if in_loader and turns is None:
            # A DataLoader in order: an idle loader leaves the tail to those reading.
            info = get_worker_info()
            sibling = self.siblings.loader(info.id, info.seed)
        if sibling is not None:
            stream.may_leave = sibling.may_leave
            leases = sibling.reading(leases)
        with closing(leases):
            try:
                for lease in leases:
                    if loader is not None:
                        yield from loader.records(lease, self.reader(lease.item))
                    elif self.reader is not None:
                        yield from lease_records.read(stream, lease, self.reader(lease.item))
                    elif in_loader:
                        stream.settle(lease)  # handed to the main process: this loader is done with it
                        yield lease.item
                    else:
                        yield lease.item  # acknowledged when the next one is asked for
            except BaseException:
                if loader is not None:
                    # Before the leases' abort: the ranges whose batches are
                    # on their way keep what the loop received.
                    loader.stop("the loader stopped before the loop received this item's last record")
                raise
        if loader is not None:
            loader.finish()  # or, when the loop closed first, gives back what it did not receive


class WorkQueueLoader(DataLoader):
    """A DataLoader over a WorkQueueDataset that counts the training loop's wait for each batch (its data stall).

    Arguments are DataLoader's. With ``num_workers > 0`` the loop waits here
    while loader processes read: this loader counts that wait, and the
    loaders send it with their heartbeats.

    With loader processes, batches come in the order the loaders read them
    (``in_order=False`` unless given): a loader whose take waits on the server
    (for a split, or at the end of the job for what others hold) would
    otherwise hold up the batches its siblings have ready, since a DataLoader
    in order takes one batch from each loader in turn. In that order the
    loaders take in turn too: one at a time, and while a sibling reads only
    once the loop has waited ``worker_sdk.turns.STARVED_SECONDS`` for data
    since the last take.

    With loader processes and a ``reader``, claims follow consumption
    (worker_sdk.receipts): the collate function is wrapped so that each
    batch carries the records in it, and a batch whose records a split gave
    to another worker after it was collated is dropped here. A split that
    cuts records out before they are collated leaves them out of their
    batch, which then holds fewer than ``batch_size``.
    """

    def __init__(self, dataset, *args, **kwargs):
        kwargs.setdefault("in_order", False)
        super().__init__(dataset, *args, **kwargs)
        # Made for each pass with loaders (persistent ones: the first), before they start.
        self.turns: LoaderTurns | None = None
        self.board: loader_board.Board | None = None
        if self.num_workers > 0:
            # Each batch tagged with the records in it (worker_sdk.receipts).
            self.collate_fn = loader_receipts.Collate(self.collate_fn)

    def __iter__(self):
        dataset = self.dataset
        if not isinstance(dataset, WorkQueueDataset):
            raise TypeError(f"WorkQueueLoader reads a WorkQueueDataset, not {type(dataset).__name__}")
        clock = stall.clock(dataset.queue.job["id"], dataset.consumer)
        # Shared before the loaders start (DataLoader starts them in iter()).
        dataset.stall = clock.shared() if self.num_workers > 0 else clock
        # Persistent loaders read every pass with what they got at the first;
        # others start anew each pass, and a pass's board and turns are its
        # own (another iterator of this loader may still be read).
        fresh = not (self.persistent_workers and self._iterator is not None)
        if self.num_workers > 0:
            if fresh:
                self.board = loader_board.Board(
                    self.num_workers, self.multiprocessing_context or multiprocessing.get_context()
                )
            else:
                self.board.reset()
            dataset.board, dataset.batched, dataset.drop_last = self.board, self.batch_size is not None, self.drop_last
        else:
            dataset.board = None
        if self.num_workers > 0 and not self.in_order:
            if fresh:
                self.turns = LoaderTurns(self.multiprocessing_context)
            else:
                self.turns.reset()
            dataset.turns = self.turns
            batches = stall.timed(super().__iter__(), self.turns.hunger)
        else:
            dataset.turns = None
            batches = super().__iter__()
        if self.board is not None:
            batches = receipts.Received(batches, self.board, dataset.queue.handed_leases())
        return stall.timed(batches, stall.Meter(lambda: clock))
