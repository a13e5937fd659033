"""Synchronous data-parallel training: every rank of an epoch runs the same number of steps, and nothing is lost.

Ranks of DDP, FSDP or MultiWorkerMirroredStrategy all-reduce their gradients
every step, so they must all run the same number of steps; a queue hands
them different amounts of data by design. A rank that runs out while
another still trains waits in the all-reduce forever (and a rank whose take
waits for a peer's lease to end waits for a peer that waits for it). Two
ways out, chosen per epoch by what the server knows:

**Steps known up front** (``plan``: every item is a record range, i.e.
sliced works or tables). At the start of epoch ``e`` the records not yet
done in epochs up to ``e`` (what earlier epochs left, then ``e``'s own) are
counted once and shared by all ranks: ``steps = unread // (world_size *
batch_size)``, drop_last. Each rank reads exactly ``steps * batch_size``
records (each loader process its share of the batches): each of its takes
asks for no more records than it still needs (``max_records``), and the
server leases the first of a longer range and leaves the rest pending, in
the take's own transaction. So no rank ever holds records another needs,
every rank runs ``steps`` steps with no collective beyond the one broadcast
of the count, everything read is trained on, and the ``unread - steps *
world * batch`` records left over (fewer than one global batch) are read
first in the next epoch (``EpochPlan.dropped``).
Once every rank has run an epoch to its end and kept every lease it took,
the next one's count is worked out rather than asked (``next_plan``): what
this one left plus the next epoch's records, the server's count then, so
the next epoch starts without a request and without a broadcast.

**Steps agreed one at a time** (records unknown: works read whole). Each
step every rank says whether it has a batch (one all-reduce of one number,
the minimum, started while the step before trains): the epoch ends for all
at the first rank that has none.
Loaders then hand each record over with its lease, and the main process
completes an item once it has trained on its last record; the items it has
not trained on to the end are given back unread, without using an attempt
(``release``), and read in a later epoch. An item a rank was in the middle
of is read again whole: at most one item per loader per rank at each
epoch's end is read twice (counted in ``SyncStats.reread``). Slice works
(``num_slices``) to make it exact.

In both ways a rank's takes read epochs up to the current one only, and end
when nothing is left to lease there (``sync``: other ranks' leases are
never worth waiting for, since those ranks finish them only by training on
with this one).
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, NamedTuple

from . import errors, lease_records, look_ahead, readers
from .client import Client
from .tracker import Budget


@dataclass(frozen=True)
class EpochPlan:
    """What every rank runs in one epoch: ``steps`` batches of ``batch_size`` (None: agreed step by step)."""

    epoch: int
    world_size: int
    batch_size: int
    unread: int | None  # records of epochs up to this one not done when it began
    steps: int | None
    per_epoch: int | None = None  # records one epoch holds (None: not known)
    leased: int | None = None  # of ``unread``, records leased when it was counted (another worker's)
    later_untouched: bool = False  # no epoch after this one was made (so none was read) when it was counted

    @property
    def dropped(self) -> int | None:
        """Records left for the next epoch (drop_last): fewer than one global batch."""
        if self.steps is None or self.unread is None:
            return None
        return self.unread - self.steps * self.world_size * self.batch_size


def plan(queue, epoch: int, batch_size: int, world_size: int) -> EpochPlan:
    """The epoch's plan from the server's count of unread records (ask it on one rank and share it)."""
    if batch_size < 1 or world_size < 1:
        raise ValueError(f"batch_size and world_size must be at least 1, not {batch_size} and {world_size}")
    counts = sliced_counts(queue, epoch)
    unread = counts["unread"]
    steps = None if unread is None else unread // (world_size * batch_size)
    made = counts.get("epochs_made")
    untouched = made is not None and made <= epoch + 1
    return EpochPlan(epoch, world_size, batch_size, unread, steps, counts["per_epoch"], counts.get("leased"), untouched)


def next_plan(plan: EpochPlan, num_epochs: int) -> EpochPlan | None:
    """The next epoch's plan, once every rank has run ``plan`` to its end keeping every lease (None: ask the server).

    Its unread records are what ``plan`` left (``dropped``) and the next
    epoch's own (none past the job's last): the server's count then, when
    the ranks' completions were all accepted and nobody else held a lease
    of those epochs, and no epoch after ``plan``'s was made when it was
    counted. A lease lost (it expired) may have failed its item on the way,
    taking its unread records out of the count, and so may another
    worker's lease in the count (``plan.leased``: a dead process's, say):
    the caller asks the server after the one, and this declines the other,
    and a job already into a later epoch (a run restarted without its
    checkpoint's position). Every rank works it out from the same shared
    plan; what the ranks read next never goes past it.
    """
    if plan.steps is None or plan.unread is None or plan.per_epoch is None:
        return None
    if plan.leased != 0 or not plan.later_untouched:
        return None
    epoch = plan.epoch + 1
    unread = plan.dropped + (plan.per_epoch if epoch < num_epochs else 0)
    steps = unread // (plan.world_size * plan.batch_size)
    return EpochPlan(epoch, plan.world_size, plan.batch_size, unread, steps, plan.per_epoch, 0, True)


def loader_quota(plan: EpochPlan, loaders: int, index: int) -> int:
    """Records loader ``index`` of ``loaders`` reads: the batches it makes when they are dealt in turn."""
    batches = plan.steps // loaders + (1 if index < plan.steps % loaders else 0)
    return batches * plan.batch_size


def sliced_counts(queue, upto_epoch: int, timeout: float = 3600.0) -> dict:
    """The server's count of the job's records up to ``upto_epoch`` (``queue.epoch_records``), once it is sliced.

    Only then are its records counted: while the answer says ``slicing``,
    it asks again. One request per epoch's plan, not a look at the job's
    state first (every rank waits for the plan at the start of an epoch that asks).
    """
    deadline = time.monotonic() + timeout
    while True:
        counts = queue.epoch_records(upto_epoch)
        if not counts["slicing"]:
            return counts
        if time.monotonic() > deadline:
            raise TimeoutError(f"work queue {queue.name}: the job was still slicing after {timeout:.0f} s")
        time.sleep(0.5)


class Handed(NamedTuple):
    """A record handed from a loader to the main process, with the lease it came from (steps agreed one by one).

    A tuple, not a dataclass: one is made per record, and a frozen
    dataclass costs twice as much to make (bench/RESULTS.md).
    """

    record: object
    lease_id: int
    token: int
    last: bool  # the last record of its item


class Run(NamedTuple):
    """Consecutive records of one lease in a batch: what the main process's ledger counts per step."""

    lease_id: int
    token: int
    records: int
    last: bool  # its item's last record is among them


def runs(samples: Iterable[Handed]) -> list[Run]:
    """A batch's records as runs of one lease each, in order."""
    found: list[Run] = []
    lease_id = token = None
    count, last = 0, False
    for sample in samples:
        if sample.lease_id != lease_id or sample.token != token:
            if count:
                found.append(Run(lease_id, token, count, last))
            lease_id, token, count = sample.lease_id, sample.token, 0
        count += 1
        last = sample.last
    if count:
        found.append(Run(lease_id, token, count, last))
    return found


# An opened epoch's first take finds nothing while another take makes that
# epoch (the server's job row is held): it takes again, this many times.
OPENED_RETRIES = 5


class OpenedEpoch:
    """One rank's reading of a planned epoch, opened while the epoch before it is still read (no loader processes).

    Its look-ahead takes the epoch's first lease at once, on its thread, so
    that the epoch's first batch does not wait for a take's round trip (nor
    for the epoch's making, which that take does): the first take was most
    of what was left at an epoch's start (bench/RESULTS.md). Until the epoch
    begins (``read_epoch(opened=...)``) it leases that epoch's own items
    only, one item: what the epoch before leaves over is for the ranks still
    reading it, and then for whichever rank takes it first. ``close()``
    gives back unread what it took and no reader began (the epoch was
    planned otherwise after all: asked, restored, another epoch set).
    """

    def __init__(self, queue, plan: EpochPlan, ahead: int):
        self.plan = plan
        self.quota = plan.steps * plan.batch_size
        stream = queue.consumers.stream(lag=None, tracks=True, upto_epoch=plan.epoch, sync=True)
        stream.budget = Budget(self.quota)
        stream.from_epoch = plan.epoch
        self.stream = stream
        self._ahead = queue.consumers.opened_ahead(stream, ahead, refill=1, retries=OPENED_RETRIES)
        # Its thread keeps the look-ahead alive: dropped unread (its loader
        # was), this goes, and so does what it took.
        weakref.finalize(self, self._ahead.close)

    def begin(self) -> Iterator:
        """Its leases, for the epoch's reader: from now on its takes lease what earlier epochs left too."""
        self.stream.from_epoch = None
        return look_ahead.consume(self._ahead)

    def close(self) -> None:
        self._ahead.close()


def read_epoch(
    queue,
    epoch: int,
    reader: Callable | None = None,
    quota: int | None = None,
    handoff: bool = False,
    alone: bool = False,
    ahead: int = 0,
    opened: OpenedEpoch | None = None,
    complete_later: bool = False,
) -> Iterator:
    """One loader's (or one rank's) records of a synchronous epoch.

    With ``quota`` (steps known): exactly that many records, or fewer only
    when the queue ran short (the caller checks). Without: until nothing is
    left to lease up to ``epoch``; with ``handoff`` the records come as
    ``Handed`` and their items are left to the main process to complete or
    release (``Ledger``). ``alone``: that epoch's items only, not what earlier
    epochs left (a worker whose input runs ahead into the next epoch while
    others still read this one must not take records they need).
    ``ahead``: leases taken ahead on a thread while this one reads
    (worker_sdk.look_ahead), never more records than the quota has left
    beyond what is held; each item's completion rides the take after it.
    They are taken ``ahead`` at a time, once none is left ahead: a rank's
    quota is its own whatever it holds, so holding more costs no other rank
    anything, and each take is a request less for the server.
    ``opened``: the epoch's reading, opened before it began (its epoch,
    quota and look-ahead are those of this call). ``complete_later``: once
    the quota is read, its items' completions go on a thread and the
    reading ends at once (the rank's main process: a normal exit closes the
    queue, which waits for them; a loader process's end would not).
    """
    if handoff and ahead:
        raise ValueError("records handed to another process are its to acknowledge: read them with ahead=0")
    read = reader or readers.of_lease
    if opened is not None:
        stream, leases = opened.stream, opened.begin()
    else:
        stream = queue.consumers.stream(lag=None if ahead else 1, tracks=quota is not None, upto_epoch=epoch, sync=True)
        stream.budget = Budget(quota) if quota is not None else None
        stream.handoff = handoff
        stream.from_epoch = epoch if alone else None
        if quota is not None and quota <= 0:
            return
        leases = look_ahead.leases(stream, ahead, refill=1)
    with closing(leases):
        for lease in leases:
            source = read(lease) if reader is None else reader(lease.item)
            if handoff:
                yield from _handed(lease, source)
            else:
                yield from lease_records.read(stream, lease, source)
            if stream.budget is not None and stream.budget.left <= 0:
                if complete_later:
                    stream.flush_consumed(later=True)
                return


def _handed(lease, records: Iterable) -> Iterator[Handed]:
    previous = None
    for record in records:
        if previous is not None:
            yield Handed(previous, lease.id, lease.token, False)
        previous = record
    if previous is not None:
        yield Handed(previous, lease.id, lease.token, True)


@dataclass
class SyncStats:
    """One epoch of one rank: steps run, items completed and given back, records that will be read again."""

    steps: int = 0
    completed: int = 0
    released: int = 0
    reread: int = 0  # records trained on from items given back (read again whole)


class HandedLeases:
    """Leases another process took and handed over with their records: this one completes or gives them back.

    A synchronous rank's loader processes lease items and hand each record
    over with its lease; the rank's main process knows, step by step, which
    items it trained on to the end (``Ledger``, below). It holds
    none of those leases: their taker's leaser heartbeats them until the
    server answers that they are done. Each request raises LeaseLostError
    when the lease expired or was fenced meanwhile; nothing is counted twice.
    """

    def __init__(self, client: Client):
        self.client = client

    def complete(self, lease_id: int, token: int) -> None:
        self.client.complete(lease_id, token)

    def release(self, lease_id: int, token: int, reason: str) -> None:
        """Gives the item back unread, without using an attempt."""
        self.client.release(lease_id, token, reason)

    def cut(self, lease_id: int, token: int, at: int) -> None:
        """Ends the lease's record range at ``at``: the rest becomes a new item, for another worker."""
        self.client.split(lease_id, token, at)


@dataclass
class Ledger:
    """The main process's account of handed records (steps agreed one by one): completes, and gives back, items.

    ``leases``: the queue's ``handed_leases()``, through which it settles them.
    An item's completion goes on a thread of its own (one at a time, in
    order): the training loop does not wait on the server between steps.
    ``give_back`` waits for those still on their way, then raises the
    first error one met (a lost lease is none: it is read again).
    """

    leases: HandedLeases
    stats: SyncStats = field(default_factory=SyncStats)
    # lease id -> (token, records trained on so far)
    _open: dict[int, list] = field(default_factory=dict)
    _sender: ThreadPoolExecutor | None = None
    _sending: deque = field(default_factory=deque)  # completions on their way, oldest first

    def trained(self, handed: list[Run]) -> None:
        """The records of a step that ran: items whose last record was among them are completed."""
        for run in handed:
            state = self._open.setdefault(run.lease_id, [run.token, 0])
            state[1] += run.records
            if run.last:
                del self._open[run.lease_id]
                self._complete(run.lease_id, run.token)

    def seen(self, handed: list[Run]) -> None:
        """Records that reached this process but were not trained on (the epoch stopped)."""
        for run in handed:
            self._open.setdefault(run.lease_id, [run.token, 0])

    def give_back(self, reason: str) -> None:
        """Every item seen and not completed goes back unread, without using an attempt (once the completions are sent)."""
        try:
            self._sent(wait=True)
        finally:
            if self._sender is not None:
                self._sender.shutdown()
                self._sender = None
            for lease_id, (token, trained) in list(self._open.items()):
                try:
                    self.leases.release(lease_id, token, reason)
                except errors.LeaseLostError:
                    pass  # its loader process gave it back as it ended, or it expired: read again all the same
                self.stats.released += 1
                self.stats.reread += trained
                del self._open[lease_id]

    def _complete(self, lease_id: int, token: int) -> None:
        self._sent(wait=False)  # an earlier completion's error reaches the loop here
        if self._sender is None:
            self._sender = ThreadPoolExecutor(1, thread_name_prefix="shardline-ledger")
        self._sending.append(self._sender.submit(self._send, lease_id, token))

    def _send(self, lease_id: int, token: int) -> bool:
        try:
            self.leases.complete(lease_id, token)
            return True
        except errors.LeaseLostError:
            return False  # it expired (a step over the lease timeout): it is read again

    def _sent(self, wait: bool) -> None:
        """Counts the completions answered (all of them, with ``wait``); raises the first one's error."""
        while self._sending and (wait or self._sending[0].done()):
            if self._sending.popleft().result():
                self.stats.completed += 1
