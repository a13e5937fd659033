"""Data stall: how long a training loop waits for its next record or batch, and how long it runs in all.

Each consumer shape puts a ``Meter`` where the training loop receives its
data (``wait()`` when the loop asks for the next record or batch, ``got()``
when it has it): the loop's own wait, not its reader's, which may run ahead
in a thread or another process. The time from one ``got()`` to the next
``wait()`` is the loop's own work (its compute). A meter belongs to the
one thread that runs its loop, so counting takes no lock; it adds what it
counted to its ``Clock`` twice a second.

A process has one clock per job and consumer (the name of the process whose
loop uses the data, see ``Leaser.consumer``). Its leaser sends the clock's
cumulative seconds with the job's heartbeats, under the clock's random id:
the server adds what grew since the clock's last report, and a new id (a
restarted process) adds its whole reading. A DataLoader's loader processes,
which hold the leases, send their main process's clock (``Clock.shared``).
"""

from __future__ import annotations

import os
import secrets
import threading
from time import monotonic
from typing import Callable, Iterable

# Seconds between heartbeats while a loop is measured: the stall shows
# within a few seconds (the lease pace alone is a third of lease_timeout,
# 20 s by default). The first comes sooner: a loop's clock is made at its
# first record, just after the take that started the leaser.
REPORT_EVERY = 5.0
FIRST_REPORT = 1.0
# Seconds a meter keeps its counts before adding them to its clock: one
# lock a half second, not one per record.
FLUSH_EVERY = 0.5


class Clock:
    """Cumulative seconds waited and busy (the loop's own work) of one consumer's loops on one job, in this process.

    Two counters that each only grow, with no rule between them: a reader in
    another process, which takes no lock, may read one before an add and the
    other after it, and still sends a valid reading.
    """

    def __init__(self):
        self.id = secrets.token_hex(8)
        self._lock = threading.Lock()
        self._values = [0.0, 0.0]  # waited, busy; a shared array once shared()

    def add(self, waited: float, busy: float) -> None:
        with self._lock:
            self._values[0] += waited
            self._values[1] += busy

    def reading(self) -> tuple[float, float]:
        """(seconds waited, seconds busy)."""
        return self._values[0], self._values[1]

    def shared(self) -> "Clock":
        """This clock, in memory that processes forked or spawned from now on read (a DataLoader's loaders)."""
        with self._lock:
            if isinstance(self._values, list):
                import multiprocessing

                values = multiprocessing.RawArray("d", 2)
                values[0], values[1] = self._values
                self._values = values
        return self

    def __getstate__(self):
        # Pickled only to start a process (RawArray refuses otherwise): the
        # child reads the same memory.
        self.shared()
        return {"id": self.id, "values": self._values}

    def __setstate__(self, state):
        self.id, self._values, self._lock = state["id"], state["values"], threading.Lock()


class Meter:
    """One loop's waits and work, counted on the thread that runs it; ``clock_of()`` gives the clock to add them to.

    The clock is asked for at the first ``got()``, once the consumer has
    leased (a stream's clock needs its leaser); counts of a loop that never
    got anything are dropped.
    """

    __slots__ = ("_clock_of", "_clock", "_waited", "_busy", "_mark", "_flushed")

    def __init__(self, clock_of: Callable[[], Clock]):
        self._clock_of = clock_of
        self._clock: Clock | None = None
        self._waited = 0.0
        self._busy = 0.0
        self._mark: float | None = None  # the last wait() or got(); None: the loop is not running
        self._flushed = float("-inf")  # the first got() flushes: it asks for the clock then

    def wait(self) -> None:
        """The loop asks for its next record or batch: the time since it got the last one was its own work."""
        now = monotonic()
        if self._mark is not None:
            self._busy += now - self._mark
        self._mark = now

    def got(self) -> None:
        """The loop has it (or learned that there is none): the time since it asked was a wait for data."""
        now = monotonic()
        if self._mark is not None:
            self._waited += now - self._mark
        self._mark = now
        if now - self._flushed >= FLUSH_EVERY:
            if self._clock is None:
                self._clock = self._clock_of()
            self._flush(now)

    def stop(self, worked: bool = False) -> None:
        """The loop is done with this consumer: its counts go to the clock, and nothing is counted until it asks again.

        ``worked``: the time since it got the last record was its own work
        (a ``lease()`` body); otherwise it is not counted (a generator may be
        closed long after its loop stopped using it).
        """
        now = monotonic()
        if worked and self._mark is not None:
            self._busy += now - self._mark
        self._mark = None
        self._flush(now)

    def _flush(self, now: float) -> None:
        if self._clock is not None and (self._waited or self._busy):
            self._clock.add(self._waited, self._busy)
        self._waited = self._busy = 0.0
        self._flushed = now


def timed(iterable: Iterable, meter: Meter) -> "Timed":
    """``iterable``'s elements, each counted by ``meter``: the time the loop waited for it, and its work on the one before.

    Closing this closes ``iterable`` (a consumer's generator gives its items back).
    ``meter`` may be anything with a Meter's ``wait``, ``got`` and ``stop``
    (worker_sdk.turns.Hunger).
    """
    return Timed(iterable, meter)


class Timed:
    """``timed``'s iterator. Not a generator: an error from ``iterable`` (a DataLoader's, for one batch) leaves it open.

    A training loop may catch that error and ask for the next element, as it
    may of the DataLoader itself; a generator would be finished by the error,
    and the loop would see the end of its data early.
    """

    _closed = True  # until __init__ has its iterator

    def __init__(self, iterable: Iterable, meter):
        self._iterator = iter(iterable)
        self._meter = meter
        self._closed = False

    def __iter__(self) -> "Timed":
        return self

    def __next__(self):
        if self._closed:
            raise StopIteration
        self._meter.wait()
        try:
            element = next(self._iterator)
        except StopIteration:
            self._meter.got()  # the wait that found the end (other workers' last items) is the loop's too
            self.close()
            raise
        except BaseException:
            self._meter.got()
            raise
        self._meter.got()
        return element

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._meter.stop()
        close = getattr(self._iterator, "close", None)
        if close is not None:
            close()

    def __del__(self):
        self.close()


# -- this process's clocks ------------------------------------------------------------

_clocks: dict[tuple[int, str], Clock] = {}
_clocks_lock = threading.Lock()


def _forget_parent() -> None:
    # A forked child starts with none of its parent's clocks (its loops are
    # its own; a loader adopts its main process's clock explicitly), and
    # with a fresh lock: a heartbeat thread of the parent may have held it
    # at the fork, and would never release the child's copy.
    global _clocks, _clocks_lock
    _clocks, _clocks_lock = {}, threading.Lock()


os.register_at_fork(after_in_child=_forget_parent)


def clock(job_id: int, consumer: str) -> Clock:
    """This process's clock of ``consumer``'s loops on job ``job_id`` (made at the first ask)."""
    with _clocks_lock:
        if (job_id, consumer) not in _clocks:
            _clocks[(job_id, consumer)] = Clock()
        return _clocks[(job_id, consumer)]


def adopt(job_id: int, consumer: str, shared: Clock) -> None:
    """A loader process: its heartbeats of ``job_id`` send ``shared``, its main process's clock, for ``consumer``."""
    with _clocks_lock:
        _clocks[(job_id, consumer)] = shared


def _find(job_id: int, consumer: str) -> Clock | None:
    with _clocks_lock:
        return _clocks.get((job_id, consumer))


class Report:
    """What one leaser's heartbeats say of its consumer's data stall (used by its heartbeat thread alone)."""

    def __init__(self, job_id: int, consumer: str):
        self.job_id, self.consumer = job_id, consumer
        self._sent: dict | None = None
        self._first = True

    def pace(self, seconds: float) -> float:
        """The heartbeat's wait: at most REPORT_EVERY while a loop of this process is measured on the job."""
        if self._first:
            self._first = False
            return min(seconds, FIRST_REPORT)
        return min(seconds, REPORT_EVERY) if _find(self.job_id, self.consumer) is not None else seconds

    def due(self) -> dict | None:
        """The heartbeat's ``stall``: the clock's id and cumulative seconds, when they changed since the last one sent."""
        found = _find(self.job_id, self.consumer)
        if found is None:
            return None
        waited, busy = found.reading()
        if waited + busy < FIRST_REPORT:
            # Too young to say anything: a loop's first wait is for its first
            # record, and the heartbeat that leaves with a process's first
            # lease would show every loop starved.
            return None
        body = {"clock": found.id, "waited": round(waited, 6), "busy": round(busy, 6)}
        return None if body == self._sent else body

    def sent(self, body: dict | None) -> None:
        if body is not None:
            self._sent = body
