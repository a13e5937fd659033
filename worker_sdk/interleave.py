"""Several leased items read at once, their records merged: WorkQueue.dataset()'s engine.

Each of ``cycle_length`` slots is a thread with its own stream: it leases an
item, reads its records into a shared buffer (``block_length`` at a time),
then leases the next. While other slots read, a slot takes only when the
consumer finds the buffer empty, and then ahead of it, asking no one for
work (``_Slots``); the slot that finds every sibling idle takes as a
consumer does: it waits at the end of the queue and asks for splits.

Claims follow consumption: a record of a record range is claimed (its
position reported, a split cut no lower) when the consumer receives it, not
when a slot reads it. A slot reads ahead at most what the buffer holds; a
split may cut below what it read, and the records read past the cut are
dropped when they reach the consumer, never delivered (the remainder's new
holder reads them). A slot takes its next item once the consumer has
received the last one whole, and acknowledges it in that take: a slot whose
reader ran ahead is not an idle worker (it would ask for splits and lease
items its consumer reaches only later), and the end of an item reaches the
server in one request with the next take, as in a loop of ``items()``. A
consumer that closes the dataset mid-item keeps what it received: the rest
of each range goes back as a new item (``Stream.stop_at``).

Why threads and not ``tf.data.Dataset.interleave`` over a generator of
leases: tf.data's interleave does not read its current elements while its
input is fetching the next one, so a take that waits at the end of a job
(for the items other processes hold) stopped this process's reading too, and
processes that waited for each other's items never read them (several
processes starting one sliced job together stalled for good).

The consumer's waits for the next record (the buffer empty: every slot still
reading or taking) are its data stall (worker_sdk.stall); the slots' own
reading is not, since it runs ahead of the consumer.
"""

from __future__ import annotations

import queue as queue_module
import threading
import time
from typing import Callable, Iterable, Iterator, NamedTuple

from . import stall
from .ahead import put_unless_stopped
from .protocol import Lease
from .stream import QueueExhausted, Stream, exhausted_message
from .tracker import RangeTracker

_PUT_POLL = 0.1  # seconds between checks for a closed consumer while the buffer is full
_CLOSE_SECONDS = 30.0
# A slot whose take ahead found nothing answers the consumer's next stall no sooner.
_RETRY_AHEAD = 0.5
_STOPPED = "the consumer stopped before receiving this item's last record"


class _Stop(Exception):
    """The consumer closed the dataset: a slot stops where it is."""


class _Reading:
    """One leased item on its way to the consumer: its stream, its tracker, and the next record to receive."""

    def __init__(self, stream: Stream, lease: Lease):
        self.stream, self.lease = stream, lease
        ranged = lease.start is not None and lease.end is not None
        self.tracker: RangeTracker | None = stream.track(lease) if ranged else None
        self._claim = stream.claimer(self.tracker)
        self.received = lease.start  # the position of the next record the consumer receives
        self.finished = threading.Event()  # the consumer received it whole, or its reader failed

    def split_off(self, position: int) -> bool:
        """Whether record ``position`` went to another worker (a slot reads no further)."""
        return self.tracker is not None and position >= self.tracker.end

    def claim(self, position: int) -> bool:
        if self._claim is None:
            return True
        if not self._claim(position):
            return False
        self.received = position + 1
        return True

    def done(self) -> None:
        self._untrack()
        self.stream.consumed(self.lease)
        self.finished.set()

    def failed(self, error: BaseException) -> None:
        self._untrack()
        self.stream.settle(self.lease, f"{type(error).__name__}: {error}")
        self.finished.set()

    def stop(self) -> None:
        self.stream.stop_at(self.lease, self.received, _STOPPED)

    def _untrack(self) -> None:
        if self.tracker is not None:
            self.stream.untrack(self.lease, self.tracker)


class _Slots:
    """When a slot takes as an idle consumer would, when ahead of one, and when not at all.

    A slot whose siblings still read is not an idle worker: its consumer
    trains on what they hold at the process's pace, however many slots read
    it. Its take asked for splits all the same, and the processes of a job
    cut one another's ranges to its end (54-90 splits in a 6-s job of eight
    processes, bench/RESULTS.md); each process's slots also leased several
    items at once, which others then had to split off. Now:

    - the slot that finds no sibling reading takes as a consumer does (it
      waits at the end of the queue, asks for splits, learns the end, and
      then every slot ends);
    - while a sibling reads, a slot takes only when the consumer found the
      buffer empty (its data stalls: the reading slots do not keep up), and
      then ahead of the consumer (``Stream.next_ahead``): it leases what is
      pending and asks no one for anything, and near the end of a job the
      server defers a slow process's take ahead. A slot that got nothing
      waits ``_RETRY_AHEAD`` before it answers another stall.

    So a process reads as few leases at once as keep its consumer fed.
    """

    def __init__(self, stop: threading.Event):
        self._stop = stop
        self._reading = 0  # slots holding an item the consumer has not received whole
        self._stalls = 0  # times the consumer found the buffer empty
        self._ended = False  # a slot learned the queue's end: every slot ends without asking again
        self._changed = threading.Condition()

    def next(self, stream: Stream) -> Lease:
        with self._changed:
            answered = self._stalls  # takes ahead for a stall to come, not for one past
        retry_at = 0.0
        while True:
            with self._changed:
                while True:
                    if self._ended:
                        raise QueueExhausted(exhausted_message(stream.name))
                    if self._stop.is_set():
                        raise _Stop
                    if self._reading == 0:
                        self._reading += 1  # counted before the take: a sibling starting now waits
                        alone = True
                        break
                    if self._stalls != answered and time.monotonic() >= retry_at:
                        answered, alone = self._stalls, False
                        break
                    self._changed.wait(_PUT_POLL)
            if alone:
                try:
                    return stream.next()
                except QueueExhausted:
                    with self._changed:
                        self._ended = True
                    self.done()
                    raise
                except BaseException:
                    self.done()
                    raise
            leases = stream.next_ahead(1)
            if leases:
                stream.leaser().started(leases)  # read from now on: never given back to an idle worker
                with self._changed:
                    self._reading += 1
                return leases[0]
            retry_at = time.monotonic() + _RETRY_AHEAD

    def stalled(self) -> None:
        """The consumer found the buffer empty."""
        with self._changed:
            self._stalls += 1
            self._changed.notify_all()

    def done(self) -> None:
        """A slot's item was received whole (or its reading, or its take, ended otherwise)."""
        with self._changed:
            self._reading -= 1
            self._changed.notify_all()


class _Block(NamedTuple):
    reading: _Reading
    first: int | None  # the position of its first record (None: not a record range)
    records: list


class _End(NamedTuple):
    reading: _Reading


class _Failed(NamedTuple):
    reading: _Reading
    error: BaseException


def interleave(
    new_stream: Callable[[], Stream],
    read: Callable[[Lease], Iterable],
    cycle_length: int,
    block_length: int,
) -> Iterator:
    """Yields the records of leased items (``read(lease)``), ``cycle_length`` items read at a time.

    ``new_stream()`` must make streams with ``lag=None``: the consumer here
    says when it received an item whole.
    """
    if cycle_length < 1 or block_length < 1:
        raise ValueError(f"cycle_length and block_length must be >= 1, not {cycle_length} and {block_length}")
    # A block per slot: each slot may be one block ahead of the consumer,
    # which is as little as lets every slot read while the consumer does.
    buffer: queue_module.Queue = queue_module.Queue(maxsize=cycle_length)
    stop = threading.Event()
    streams = [new_stream() for _ in range(cycle_length)]
    # By lease id: the items the consumer has not received whole. Each is
    # taken out once, by the consumer (its end, or the close) or by a slot
    # whose take returned after the close.
    readings: dict[int, _Reading] = {}
    readings_lock = threading.Lock()
    # How many slots hold an item the consumer has not received whole; a
    # slot whose siblings read takes ahead (see Slots).
    slots = _Slots(stop)

    def out(reading: _Reading) -> bool:
        with readings_lock:
            return readings.pop(reading.lease.id, None) is not None

    def put(message) -> None:
        if not put_unless_stopped(buffer, message, stop):
            raise _Stop

    def read_item(reading: _Reading) -> bool:
        """Puts the item's records in the buffer, then its end; False after its reader's error (the consumer raises it)."""
        source = None
        position = reading.lease.start
        first, block = position, []
        try:
            source = iter(read(reading.lease))
            for record in source:
                if position is not None:
                    if reading.split_off(position):
                        break  # the rest of the range is another worker's
                    position += 1
                block.append(record)
                if len(block) == block_length:
                    put(_Block(reading, first, block))
                    first, block = position, []
        except _Stop:
            raise
        except Exception as exc:  # the records read before it are the consumer's; then the item fails
            if block:
                put(_Block(reading, first, block))
            put(_Failed(reading, exc))
            return False
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()  # the reader's file, when a split stopped it early
        if block:
            put(_Block(reading, first, block))
        put(_End(reading))
        return True

    def slot(stream: Stream) -> None:
        try:
            while True:
                try:
                    lease = slots.next(stream)
                except QueueExhausted:
                    break
                reading = _Reading(stream, lease)
                with readings_lock:
                    readings[lease.id] = reading
                try:
                    if not read_item(reading):
                        return  # the consumer raises the reader's error: this slot takes nothing more
                    while not reading.finished.wait(_PUT_POLL):  # the consumer's turn: see the module's text
                        if stop.is_set():
                            raise _Stop
                    stream.flush_consumed()
                except _Stop:
                    if out(reading):  # leased as the consumer closed: given back here
                        reading.stop()
                    raise
                finally:
                    slots.done()
        except _Stop:
            pass
        except BaseException as exc:  # the take's error (a cancelled job) reaches the consumer
            buffer.put(exc)
            return
        buffer.put(None)

    threads = [
        threading.Thread(target=slot, args=(stream,), name=f"shardline-slot-{index}", daemon=True)
        for index, stream in enumerate(streams)
    ]
    for thread in threads:
        thread.start()
    running = len(threads)
    meter = stall.Meter(streams[0].stall_clock)
    meter.wait()
    try:
        while running:
            try:
                message = buffer.get_nowait()
            except queue_module.Empty:
                slots.stalled()
                message = buffer.get()
            if message is None:
                running -= 1
            elif isinstance(message, _Block):
                for offset, record in enumerate(message.records):
                    if message.first is not None and not message.reading.claim(message.first + offset):
                        break  # read ahead past a split: dropped, the remainder's holder reads it
                    meter.got()
                    yield record
                    meter.wait()
            elif isinstance(message, _End):
                if out(message.reading):
                    message.reading.done()
            elif isinstance(message, _Failed):
                if out(message.reading):
                    message.reading.failed(message.error)
                raise message.error
            else:
                raise message
        meter.got()  # the wait that found the end is the consumer's too
    finally:
        meter.stop()
        stop.set()
        for stream in streams:
            stream.stop()
        # Slots blocked on a full buffer see the stop within _PUT_POLL; one
        # in the middle of a request finishes it first. A slot in a take,
        # which may wait on the server for work, holds no item to give back
        # yet: it is not waited for, and gives back what the take brings when
        # it returns. Past the deadline, a slot is left to end on its own.
        deadline = time.monotonic() + _CLOSE_SECONDS
        while (
            any(thread.is_alive() and not stream.taking for thread, stream in zip(threads, streams))
            and time.monotonic() < deadline
        ):
            try:
                buffer.get(timeout=_PUT_POLL)
            except queue_module.Empty:
                pass
        # What the consumer did not receive whole goes back; what it did is acknowledged.
        with readings_lock:
            left = list(readings.values())
            readings.clear()
        for reading in left:
            reading.stop()
        for stream in streams:
            stream.flush_consumed()
