"""PyTorch for synchronous data-parallel training (DDP, FSDP): SyncLoader.

``SyncLoader`` runs one epoch as the same number of steps on every rank of
a process group, however unevenly the queue deals the data (worker_sdk.sync
says how); ``QueueState`` (worker_sdk.torch_state) saves and restores a
queue's position and the loader's epoch with ``torch.distributed.checkpoint``.
Both are imported from worker_sdk.torch. What they ask of the process group
(and its end at exit) is in worker_sdk.collectives.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
from typing import Callable, Iterable

from . import collectives, loader_process, stall, sync
from .ahead import Ahead
from .names import default_worker_name
from .queue import WorkQueue

try:
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info
except ImportError as exc:
    raise ImportError(f"worker_sdk.torch needs PyTorch: pip install torch ({exc})") from exc

# Batches SyncLoader reads ahead of the step in an agreed epoch without
# loader processes: one in hand while the next is read, as a DataLoader's
# prefetch_factor of 2.
AHEAD_BATCHES = 2
# Leases a planned epoch's reader takes ahead, in the main process or a
# loader process: the next items' take waits on a thread of its own while
# this one's records are read, and leases as many as the quota has room for
# (look_ahead.MAX_COUNT at most; a rank's quota is its own, so holding more
# costs no other rank anything): an epoch's reader takes about twice. The
# completions of what it leased go together as its reading ends. Each
# request costs the server's cores, which a 0-ms step loop needs, about the
# same whatever it carries (bench/RESULTS.md). Without loader processes the
# records are read on the training thread, as a DataLoader without them
# reads: on a thread of their own they cost the step loop more than they
# saved (the GIL), while a take's round trip waits without holding it.
AHEAD_LEASES = 64


class _HandedCollate:
    """Collates the records of ``Handed`` samples and keeps where they came from, as runs (loader processes pickle it)."""

    def __init__(self, collate):
        self.collate = collate

    def __call__(self, samples):
        return self.collate([s.record for s in samples]), sync.runs(samples)


class _EpochDataset(IterableDataset):
    """One rank's records of one synchronous epoch, read by the DataLoader's loader processes (or its own)."""

    def __init__(
        self,
        queue: WorkQueue,
        reader,
        plan: sync.EpochPlan,
        consumer: str,
        clock: stall.Clock | None,
        gc_freeze: bool,
        lost=None,
        opened: sync.OpenedEpoch | None = None,
    ):
        self.queue, self.reader, self.plan, self.consumer, self.stall = queue, reader, plan, consumer, clock
        self.gc_freeze = gc_freeze
        # Set when a lease this reader took was lost (a planned epoch): shared memory the rank reads.
        self.lost = lost
        # The epoch's reading, opened as the epoch before was read (no loader processes).
        self.opened = opened

    def __iter__(self):
        info = get_worker_info()
        index, loaders = (0, 1) if info is None else (info.id, info.num_workers)
        if info is not None:
            if self.gc_freeze:
                loader_process.freeze_inherited()
            self.queue.worker = f"{self.consumer}:loader{info.id}:{os.getpid()}"
            self.queue.consumer = self.consumer
            if self.stall is not None:
                stall.adopt(self.queue.job["id"], self.consumer, self.stall)
        if self.plan.steps is not None:
            quota = sync.loader_quota(self.plan, loaders, index)
            lost = self.queue.leases_lost()
            opened = self.opened if info is None else None
            # In the rank's own process the last completions need not hold
            # up the epoch's end: the ranks' next agreement counts a refusal.
            yield from sync.read_epoch(
                self.queue,
                self.plan.epoch,
                self.reader,
                quota,
                ahead=AHEAD_LEASES,
                opened=opened,
                complete_later=info is None,
            )
            if self.lost is not None and self.queue.leases_lost() != lost:
                self.lost.value = 1
        else:
            ending = _LoaderEnd(self.queue, self.plan.epoch) if info is not None else None
            yield from sync.read_epoch(self.queue, self.plan.epoch, self.reader, handoff=True)
            if ending is not None:
                ending.read_all()


class _LoaderEnd:
    """What an agreed epoch's loader process leaves behind as it exits: it depends on why it exits.

    The epoch stopped: the batches it prefetched and the rank never received
    end with the process, and nothing else gives their items back before
    the lease expires (the next epoch would end without them). So it does,
    as it exits. Its records ran out: the DataLoader ends it as soon as it
    hears so, while batches it read may still wait there behind a slower
    sibling's; the rank trains on them and completes their items, so they
    stay leased for it (given back, they were read a second time).
    """

    def __init__(self, queue: WorkQueue, epoch: int):
        self.queue, self.epoch, self.ended = queue, epoch, False
        multiprocessing.util.Finalize(None, self._exit, exitpriority=10)  # at the process's exit

    def read_all(self) -> None:
        self.ended = True
        self.queue.consumers.leave_handed()

    def _exit(self) -> None:
        if not self.ended:
            self.queue.consumers.release_unfinished(f"epoch {self.epoch} stopped before the rank trained on this item")


class SyncLoader:
    """A DataLoader for synchronous data-parallel training (DDP, FSDP) over a WorkQueue.

    ``for batch in loader`` runs one epoch, the same number of steps on every
    rank of the process group (``group``, default the world), however unevenly
    the queue deals the data; ``set_epoch(e)`` picks the epoch, as with
    DistributedSampler (default: one after the last). ``len(loader)`` is the
    epoch's steps when the records are known. ``stats`` says, after an epoch,
    what it ran and gave back. See worker_sdk.sync for how.

    ``reader(item)`` (picklable, for ``num_workers > 0``) yields an item's
    records in order; by default the SDK's readers. Each loader process
    freezes what it holds as it starts (a forked one: what it inherited) out
    of the garbage collector's reach (worker_sdk.loader_process);
    ``gc_freeze=False`` leaves it to it. Other keyword arguments go to the
    DataLoader (not ``batch_size``, ``sampler``, ``shuffle``).
    """

    def __init__(
        self,
        queue: WorkQueue,
        batch_size: int,
        reader: Callable[[str], Iterable] | None = None,
        *,
        num_workers: int = 0,
        collate_fn: Callable | None = None,
        group=None,
        gc_freeze: bool = True,
        **loader_kwargs,
    ):
        from torch.utils.data import default_collate

        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.queue, self.batch_size, self.reader = queue, batch_size, reader
        self.num_workers, self.group, self.loader_kwargs = num_workers, group, loader_kwargs
        self.gc_freeze = gc_freeze
        self.collate_fn = collate_fn or default_collate
        self.consumer = queue.consumer or queue.worker or default_worker_name()
        self.epoch = 0
        self.plan: sync.EpochPlan | None = None
        # The next epoch's plan, worked out as this one ended on every rank
        # (sync.next_plan): that epoch then starts without asking the server.
        self.next_plan: sync.EpochPlan | None = None
        # That epoch's reading, opened while this one is read, if it may
        # come next (sync.OpenedEpoch); closed unless it does.
        self.opened: sync.OpenedEpoch | None = None
        # The queue's lost leases when the ranks last agreed that all kept
        # theirs (a worked-out plan is used only if none was lost since),
        # and when the current epoch's plan was made: the epoch kept its
        # leases if none was lost since then.
        self._lost_agreed: int | None = None
        self._lost_from: int | None = None
        self.stats: sync.SyncStats | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.plan = None

    def after_restore(self, epoch: int) -> None:
        """The job was put back to a snapshot on every rank (QueueState does it): ``epoch`` is counted by the server."""
        self.next_plan = None
        self._close_opened()
        self.set_epoch(epoch)

    def __len__(self) -> int:
        plan = self._plan()
        if plan.steps is None:
            raise TypeError("the epoch's steps are not known up front: its works are read whole (use num_slices)")
        return plan.steps

    def __iter__(self):
        plan = self._plan()
        self.next_plan = None  # worked out again only if this epoch runs to its end
        self.stats = sync.SyncStats()
        meter = stall.Meter(self._stall_clock)  # the rank's wait for each batch: its data stall
        kept = False  # a planned epoch run to its end, every lease its readers took kept
        try:
            if plan.steps is not None:
                lost = multiprocessing.RawValue("b", 0)  # its readers' (loader processes too)
                yield from self._planned(plan, meter, lost)
                kept = not lost.value  # nor any loader process's (their own count)
            else:
                yield from self._agreed(plan, meter)
        finally:
            meter.stop()
            self.epoch = plan.epoch + 1  # the plan stays, for what it said (dropped)
        # Every rank has read its share once all are here: a snapshot
        # (QueueState, which waits for every rank's last completions, sent
        # on a thread) taken now holds the whole epoch and nothing beyond it.
        # Meeting, the ranks also learn whether all kept their leases so far
        # (a completion refused later counts at their next agreement): only
        # then is the next epoch's count worked out (sync.next_plan).
        self._lost_agreed = self.queue.leases_lost()
        kept = kept and self._lost_agreed == self._lost_from
        if collectives.all_agree(self.group, kept):
            self.next_plan = sync.next_plan(plan, self.queue.num_epochs)

    def _plan(self) -> sync.EpochPlan:
        """The epoch's plan: worked out as the last epoch ended, else counted on rank 0 and shared (the same steps everywhere)."""
        if self.plan is not None and self.plan.epoch == self.epoch:
            return self.plan
        rank, world = collectives.rank_and_world(self.group)
        if world > 1:
            collectives.hold(self.group)
        if self.next_plan is not None and self.next_plan.epoch == self.epoch:
            # Only if no rank lost a lease since they agreed at the last
            # epoch's end: the next epoch's first lease, held between the
            # epochs, may have failed its item on the way.
            if collectives.all_agree(self.group, self.queue.leases_lost() == self._lost_agreed):
                self.plan, self._lost_from = self.next_plan, self._lost_agreed
                return self.plan
        # Asked: what was opened ahead of its epoch (by this loader or one
        # dropped) goes back first, and the last epoch's completions (sent
        # on a thread) are answered, on every rank before rank 0 counts: the
        # count would hold records no rank reads.
        self.next_plan = self.opened = None
        self.queue.consumers.close_opened()
        self.queue.settle()
        if world > 1:
            collectives.all_agree(self.group, True)
        found = [None]
        if rank == 0:
            found[0] = sync.plan(self.queue, self.epoch, self.batch_size, world)
        if world > 1:
            import torch.distributed as dist

            dist.broadcast_object_list(found, src=collectives.global_rank(self.group, 0), group=self.group)
        self.plan, self._lost_from = found[0], self.queue.leases_lost()
        return self.plan

    def _close_opened(self) -> None:
        opened, self.opened = self.opened, None
        if opened is not None:
            opened.close()

    def _open_next(self, plan: sync.EpochPlan) -> None:
        """Opens the next epoch's reading now, if it may be worked out from ``plan`` (sync.OpenedEpoch)."""
        upcoming = sync.next_plan(plan, self.queue.num_epochs)
        if upcoming is not None and upcoming.steps > 0:
            self.opened = sync.OpenedEpoch(self.queue, upcoming, AHEAD_LEASES)

    def _stall_clock(self) -> stall.Clock:
        return stall.clock(self.queue.job["id"], self.consumer)

    def _loader(self, plan: sync.EpochPlan, collate, lost=None, opened=None) -> DataLoader:
        # Loader processes hold the leases: they send the rank's data-stall clock.
        clock = self._stall_clock().shared() if self.num_workers > 0 else None
        dataset = _EpochDataset(self.queue, self.reader, plan, self.consumer, clock, self.gc_freeze, lost, opened)
        return DataLoader(
            dataset, batch_size=self.batch_size, num_workers=self.num_workers, collate_fn=collate, **self.loader_kwargs
        )

    def _ahead(self, loader: DataLoader, depth: int) -> Ahead:
        return Ahead(loader, depth=depth if self.num_workers == 0 else 0, name="shardline-sync-ahead")

    def _planned(self, plan: sync.EpochPlan, meter: stall.Meter, lost):
        produced = 0
        # The epoch's reading may have been opened as the last one was read:
        # its first lease is here. Without loader processes only: they are
        # new each epoch, and a lease is its taker's.
        opened, self.opened = self.opened, None
        if opened is not None and (self.num_workers > 0 or opened.plan != plan):
            opened.close()
            opened = None
        # Read on this thread: the reading takes its leases ahead (AHEAD_LEASES).
        ahead = self._ahead(self._loader(plan, self.collate_fn, lost, opened), 0)
        try:
            for batch in stall.timed(ahead, meter):
                produced += 1
                self.stats.steps += 1
                if produced == 1 and self.num_workers == 0:
                    self._open_next(plan)  # once this epoch's reading is under way
                yield batch
        finally:
            ahead.close()  # an epoch left early: its read-ahead batches were claimed, as a loader process's are
            if opened is not None:
                opened.close()  # given back if the reading never began
        if produced < plan.steps:
            rank, _world = collectives.rank_and_world(self.group)
            raise RuntimeError(
                f"work queue {self.queue.name}: rank {rank} got {produced} of epoch {plan.epoch}'s {plan.steps} "
                "batches: records planned for the epoch were read elsewhere (another reader of the job, or a "
                "restore since the count); the other ranks would wait for this one, so it stops here"
            )

    def _agreed(self, plan: sync.EpochPlan, meter: stall.Meter):
        ledger = sync.Ledger(self.queue.handed_leases(), self.stats)
        # Without loader processes the main process reads: on a thread, so
        # that the next batch's takes and reads overlap this step (records
        # handed over are acknowledged by the ledger, not by a take ahead).
        ahead = self._ahead(self._loader(plan, _HandedCollate(self.collate_fn)), AHEAD_BATCHES)
        batch = None
        try:
            meter.wait()
            batch = next(ahead, None)
            meter.got()
            agreed = collectives.Agreement(self.group)
            agreed.start(batch is not None)
            while True:
                if not agreed.result():  # a wait for the other ranks, not for data
                    return
                data, handed = batch
                ledger.seen(handed)
                # The next batch's agreement runs while this step trains: the
                # rank waits on it after the step, and only when a peer is
                # behind. So the next batch is in hand before this one goes.
                meter.wait()
                batch = next(ahead, None)
                meter.got()
                agreed.start(batch is not None)
                yield data
                ledger.trained(handed)  # the caller asked for the next batch: the step ran
                self.stats.steps += 1
        finally:
            # The reading stops (the loader processes end) before the items
            # go back, those of batches read ahead and never trained on too.
            if batch is not None:
                ledger.seen(batch[1])
            for _data, handed in ahead.close():
                ledger.seen(handed)
            ledger.give_back(f"epoch {plan.epoch} stopped before this rank trained on the whole item")
