"""PyTorch for synchronous data-parallel training (DDP, FSDP): SyncLoader and QueueState.

``SyncLoader`` runs one epoch as the same number of steps on every rank of
a process group, however unevenly the queue deals the data (worker_sdk.sync
says how); ``QueueState`` saves and restores a queue's position with
``torch.distributed.checkpoint``. Both are imported from worker_sdk.torch.
The end of the process groups they use is here too: gloo needs it to end
while the interpreter still runs.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing.util
import os
import weakref
from typing import Callable, Iterable

from . import at_exit, stall, sync
from .ahead import Ahead
from .names import default_worker_name
from .queue import WorkQueue

try:
    import torch.distributed as _dist
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info
except ImportError as exc:
    raise ImportError(f"worker_sdk.torch needs PyTorch: pip install torch ({exc})") from exc

if _dist.is_available() and not _dist.is_initialized():
    # Its collectives take ``group=group.WORLD`` as a default argument, which
    # Python evaluates at import: imported after init_process_group (DDP's
    # first model and torch.distributed.checkpoint import it) it holds the
    # world group until the interpreter finalizes, past destroy_process_group,
    # and the group then ends too late (see _end_process_groups). Imported
    # now, before the script's init_process_group, the default is None.
    import torch.distributed.nn.functional  # noqa: F401

log = logging.getLogger("worker_sdk")

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

    def __init__(self, queue: WorkQueue, reader, plan: sync.EpochPlan, consumer: str, clock: stall.Clock | None):
        self.queue, self.reader, self.plan, self.consumer, self.stall = queue, reader, plan, consumer, clock

    def __iter__(self):
        info = get_worker_info()
        index, loaders = (0, 1) if info is None else (info.id, info.num_workers)
        if info is not None:
            self.queue.worker = f"{self.consumer}:loader{info.id}:{os.getpid()}"
            self.queue.consumer = self.consumer
            if self.stall is not None:
                stall.adopt(self.queue.job["id"], self.consumer, self.stall)
        if self.plan.steps is not None:
            quota = sync.loader_quota(self.plan, loaders, index)
            yield from sync.read_epoch(self.queue, self.plan.epoch, self.reader, quota, ahead=AHEAD_LEASES)
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
        self.queue.leave_handed()

    def _exit(self) -> None:
        if not self.ended:
            self.queue.release_unfinished(f"epoch {self.epoch} stopped before the rank trained on this item")


class SyncLoader:
    """A DataLoader for synchronous data-parallel training (DDP, FSDP) over a WorkQueue.

    ``for batch in loader`` runs one epoch, the same number of steps on every
    rank of the process group (``group``, default the world), however unevenly
    the queue deals the data; ``set_epoch(e)`` picks the epoch, as with
    DistributedSampler (default: one after the last). ``len(loader)`` is the
    epoch's steps when the records are known. ``stats`` says, after an epoch,
    what it ran and gave back. See worker_sdk.sync for how.

    ``reader(item)`` (picklable, for ``num_workers > 0``) yields an item's
    records in order; by default the SDK's readers. Other keyword arguments
    go to the DataLoader (not ``batch_size``, ``sampler``, ``shuffle``).
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
        **loader_kwargs,
    ):
        from torch.utils.data import default_collate

        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.queue, self.batch_size, self.reader = queue, batch_size, reader
        self.num_workers, self.group, self.loader_kwargs = num_workers, group, loader_kwargs
        self.collate_fn = collate_fn or default_collate
        self.consumer = queue.consumer or queue.worker or default_worker_name()
        self.epoch = 0
        self.plan: sync.EpochPlan | None = None
        self.stats: sync.SyncStats | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.plan = None

    def __len__(self) -> int:
        plan = self._plan()
        if plan.steps is None:
            raise TypeError("the epoch's steps are not known up front: its works are read whole (use num_slices)")
        return plan.steps

    def __iter__(self):
        plan = self._plan()
        self.stats = sync.SyncStats()
        meter = stall.Meter(self._stall_clock)  # the rank's wait for each batch: its data stall
        try:
            if plan.steps is not None:
                yield from self._planned(plan, meter)
            else:
                yield from self._agreed(plan, meter)
        finally:
            meter.stop()
            self.epoch = plan.epoch + 1  # the plan stays, for what it said (dropped)
        # Every rank has settled its items once all are here: a snapshot
        # (QueueState) taken now holds the whole epoch and nothing beyond it.
        _barrier(self.group)

    def _plan(self) -> sync.EpochPlan:
        """The epoch's plan, counted on rank 0 and shared (every rank must run the same steps)."""
        if self.plan is not None and self.plan.epoch == self.epoch:
            return self.plan
        rank, world = _rank_and_world(self.group)
        if world > 1:
            _hold(self.group)
        found = [None]
        if rank == 0:
            sync.until_sliced(self.queue)
            found[0] = sync.plan(self.queue, self.epoch, self.batch_size, world)
        if world > 1:
            import torch.distributed as dist

            dist.broadcast_object_list(found, src=_global_rank(self.group, 0), group=self.group)
        self.plan = found[0]
        return self.plan

    def _stall_clock(self) -> stall.Clock:
        return stall.clock(self.queue.job["id"], self.consumer)

    def _loader(self, plan: sync.EpochPlan, collate) -> DataLoader:
        # Loader processes hold the leases: they send the rank's data-stall clock.
        clock = self._stall_clock().shared() if self.num_workers > 0 else None
        dataset = _EpochDataset(self.queue, self.reader, plan, self.consumer, clock)
        return DataLoader(
            dataset, batch_size=self.batch_size, num_workers=self.num_workers, collate_fn=collate, **self.loader_kwargs
        )

    def _ahead(self, loader: DataLoader, depth: int) -> Ahead:
        return Ahead(loader, depth=depth if self.num_workers == 0 else 0, name="shardline-sync-ahead")

    def _planned(self, plan: sync.EpochPlan, meter: stall.Meter):
        produced = 0
        # Read on this thread: the reading takes its leases ahead (AHEAD_LEASES).
        ahead = self._ahead(self._loader(plan, self.collate_fn), 0)
        try:
            for batch in stall.timed(ahead, meter):
                produced += 1
                self.stats.steps += 1
                yield batch
        finally:
            ahead.close()  # an epoch left early: its read-ahead batches were claimed, as a loader process's are
        if produced < plan.steps:
            rank, _world = _rank_and_world(self.group)
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
            agreed = _Agreement(self.group)
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


class QueueState:
    """A queue's position for ``torch.distributed.checkpoint`` (a ``Stateful``): a snapshot, and the loader's epoch.

    ``dcp.save({"queue": QueueState(queue, loader), ...})`` takes a snapshot
    of the job; ``dcp.load`` restores it on every rank (one restore: the
    ranks of one launch attempt share its generation, the torchrun run id and
    restart count) and sets the loader's next epoch. Saved between epochs
    it is exact: a synchronous epoch has trained on everything it read, and
    the snapshot holds nothing else, whatever the world size that resumes.
    Saved within an epoch, the items being read then are read again whole.
    """

    def __init__(self, queue: WorkQueue, loader: SyncLoader | None = None):
        self.queue, self.loader = queue, loader

    def state_dict(self) -> dict:
        # Every rank saves (and dcp.load asks for) the state: one snapshot, on
        # rank 0, shared, rather than one per rank.
        group = self.loader.group if self.loader is not None else None
        rank, world = _rank_and_world(group)
        if world > 1:
            _hold(group)
        found = [None]
        if rank == 0:
            found[0] = {
                "digest": self.queue.spec_digest(),
                "position": self.queue.checkpoint_state().decode(),
                "epoch": self.loader.epoch if self.loader is not None else 0,
            }
        if world > 1:
            import torch.distributed as dist

            dist.broadcast_object_list(found, src=_global_rank(group, 0), group=group)
        return found[0]

    def load_state_dict(self, state: dict) -> None:
        generation = os.environ.get("SHARDLINE_RESTORE_GENERATION") or ":".join(
            os.environ.get(name, "") for name in ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")
        )
        self.queue.restore_checkpoint_state(state["digest"], state["position"], generation)
        if self.loader is not None:
            self.loader.set_epoch(int(state["epoch"]))


# -- the process group at exit -------------------------------------------------------
#
# gloo runs each collective on a thread of the process group, which lets go
# of the collective's tensors only after the caller has its result (and a
# barrier holds the collectives still in flight when it began until it is let
# go of in turn). Freeing a tensor that Python has let go of meanwhile takes
# the GIL. So the group must end (its destructor joins those threads) while
# the interpreter runs and with the GIL free: its Python handle does that
# when it holds the last reference. Two other endings race with those
# threads: the DDP model's Reducer holding the last reference when the
# training function returns (it joins with the GIL held: the rank hangs), and
# the group living until the interpreter finalizes (a thread that asks for
# the GIL then is ended inside a C++ destructor: "terminate called without an
# active exception", SIGABRT, after the rank's work is done; pytorch issue
# 190489). The SDK holds the groups its SyncLoaders use and lets go of them
# last, at a normal exit, before the interpreter finalizes.

_groups: list = []
_groups_pid: int | None = None


def _hold(group) -> None:
    """Keeps ``group`` (None: the world), if gloo runs it, until a normal exit: see _end_process_groups."""
    global _groups_pid
    import torch.distributed as dist

    group = dist.group.WORLD if group is None else group
    if group is None or "gloo" not in str(dist.get_backend(group)):
        return
    if _groups_pid not in (None, os.getpid()):
        return  # a forked copy: its groups' threads are not in it, so it must never end them
    _groups_pid = os.getpid()
    if not any(group is held for held in _groups):
        _groups.append(group)
    at_exit.after_queues(_end_process_groups)


def _end_process_groups() -> None:
    """Ends the held process groups now, while the interpreter runs (at a normal exit, after the queues close)."""
    if not _groups or _groups_pid != os.getpid():
        return
    import torch.distributed as dist

    gc.collect()  # a DDP model in a reference cycle lets go of its group now, while ours still holds it
    if dist.is_initialized() and dist.get_backend() == "gloo":
        dist.destroy_process_group()  # the script did not; its groups then end here as well
    handles = [weakref.ref(group) for group in _groups]
    _groups.clear()  # the last references: each group's destructor joins its threads here, the GIL released
    if any(handle() is not None for handle in handles):
        log.warning(
            "a torch.distributed process group is still referenced at exit (a DDP model in a global "
            "variable, or torch.distributed.nn imported after init_process_group); gloo may abort the process as "
            "the interpreter ends (pytorch issue 190489)"
        )


def _rank_and_world(group) -> tuple[int, int]:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def _global_rank(group, rank: int) -> int:
    import torch.distributed as dist

    return rank if group is None else dist.get_global_rank(group, rank)


def _barrier(group) -> None:
    import torch.distributed as dist

    if _rank_and_world(group)[1] > 1:
        dist.barrier(group=group)


class _Agreement:
    """Whether every rank has a batch: one all-reduce (the minimum) of one number a step, started early, read later.

    ``start`` comes before the step before the one it decides, and
    ``result`` after it: the collective overlaps the training, and a rank
    waits on it only when a peer is behind. Every rank starts its
    agreements and its steps' own collectives (DDP's gradients) in the same
    order, which is all a process group asks. One is in flight at a time.
    """

    def __init__(self, group):
        import torch.distributed as dist

        self.group, self.world = group, _rank_and_world(group)[1]
        self.device = None
        if self.world > 1:
            import torch

            self.device = (
                torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" else "cpu"
            )
        self.answer: bool | None = None
        self.work = self.flag = None

    def start(self, mine: bool) -> None:
        if self.world == 1:
            self.answer = mine
            return
        import torch
        import torch.distributed as dist

        self.answer = None
        self.flag = torch.tensor([1 if mine else 0], device=self.device)
        self.work = dist.all_reduce(self.flag, op=dist.ReduceOp.MIN, group=self.group, async_op=True)

    def result(self) -> bool:
        if self.answer is None:
            self.work.wait()
            self.answer, self.work = bool(self.flag.item()), None
        return self.answer
