"""Several leased items read at once, their records merged: WorkQueue.dataset()'s engine.

Each of ``cycle_length`` slots is a thread with its own stream: it leases an
item, reads its records into a shared buffer (``block_length`` at a time),
then leases the next. A process reads as few items at once as keep its
consumer fed (worker_sdk.slots): one slot takes at a time; while a sibling
reads, a slot takes only once the consumer has waited ``STARVED_SECONDS``
seconds on an empty buffer, and then without waiting on the server; the slot
that finds every sibling done takes as a consumer does (it waits at the end
of the queue, learns the end, and then every slot ends). With a look-ahead
(``WorkQueue(look_ahead=N)``) the first slot's next items are leased on a
thread while it reads one (worker_sdk.look_ahead), and only that slot takes
when no sibling reads: otherwise its consumer waited for a take at every
item's end (10-15 ms a take on a 2-core machine, bench/RESULTS.md).

Claims follow consumption: a record of a record range is claimed (its
position reported, a split cut no lower) when the consumer receives it, not
when a slot reads it. A slot reads ahead at most what the buffer holds; a
split may cut below what it read, and the records read past the cut are
dropped when they reach the consumer, never delivered (the remainder's new
holder reads them). A slot acknowledges its item once the consumer has
received it whole, and only then may take another as a consumer does: a slot
whose reader ran ahead is not an idle worker (it would ask for splits and
lease items its consumer reaches only later). What the first slot leases
ahead is leased as such: the server hands it no split's piece, and gives it
to a worker with nothing to read until the slot starts it. A consumer that
closes the dataset mid-item keeps what it received: the rest of each range
goes back as a new item (``Stream.stop_at``).

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

from . import lease_records, stall
from .ahead import put_unless_stopped
from .hand_over import Blocks
from .look_ahead import LookAhead
from .protocol import Lease
from .queue_end import QueueExhausted
from .slots import Slots, Stopped
from .stream import Stream
from .tracker import RangeTracker

_PUT_POLL = 0.1  # seconds between checks for a closed consumer while the buffer is full
_CLOSE_SECONDS = 30.0
_JOIN_POLL = 0.01  # seconds between a closing consumer's looks at slots still running
_STOPPED = "the consumer stopped before receiving this item's last record"


class _Reading:
    """One leased item on its way to the consumer: its stream, its tracker, and the next record to receive."""

    def __init__(self, stream: Stream, lease: Lease):
        self.stream, self.lease = stream, lease
        ranged = lease.start is not None and lease.end is not None
        self.tracker: RangeTracker | None = stream.track(lease) if ranged else None
        self._claim = lease_records.claimer(stream, self.tracker)
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


class _Block(NamedTuple):
    reading: _Reading
    first: int | None  # the position of its first record (None: not a record range)
    records: list


class _End(NamedTuple):
    reading: _Reading


class _Failed(NamedTuple):
    reading: _Reading
    error: BaseException


def _drain(buffer: queue_module.Queue) -> None:
    while True:
        try:
            buffer.get_nowait()
        except queue_module.Empty:
            return


def interleave(
    new_stream: Callable[[], Stream],
    read: Callable[[Lease], Iterable],
    cycle_length: int,
    block_length: int,
    depth: int = 0,
    blocks: Blocks | None = None,
    most: int | None = None,
) -> Iterator:
    """Yields the records of leased items (``read(lease)``), ``cycle_length`` items read at a time.

    ``new_stream()`` must make streams with ``lag=None``: the consumer here
    says when it received an item whole. ``depth``: items the first slot
    leases ahead while it reads one (worker_sdk.look_ahead); it is then the
    slot that takes when no sibling reads (``most``: ``LookAhead``'s). ``blocks``: yields lists of
    records, as many as it says (fewer rather than wait), not records one
    by one (worker_sdk.hand_over).
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
    # The first slot's next item is leased while it reads one, so that the
    # consumer does not wait for a take between two items; one taken ahead
    # and not started goes back to a worker with nothing to read.
    primary = LookAhead(streams[0], depth, name="shardline-slot-ahead", most=most) if depth else None
    slots = Slots(stop, primary)

    def out(reading: _Reading) -> bool:
        with readings_lock:
            return readings.pop(reading.lease.id, None) is not None

    def put(message) -> None:
        if not put_unless_stopped(buffer, message, stop):
            raise Stopped

    def read_item(reading: _Reading) -> bool:
        """Puts the item's records in the buffer, then its end; False after its reader's error (the consumer raises it)."""
        source = None
        position = reading.lease.start
        first, block = position, []
        began = 0.0  # with blocks: when the block's first record was read
        try:
            source = iter(read(reading.lease))
            for record in source:
                if position is not None:
                    if reading.split_off(position):
                        break  # the rest of the range is another worker's
                    position += 1
                if blocks is not None and not block:
                    began = blocks.clock()
                block.append(record)
                if len(block) < block_length:
                    continue
                if blocks is not None and len(block) < blocks.size():
                    # As many as the consumer's next block holds, unless it
                    # waits, the reader is slower than that block's time, or
                    # the consumer stopped (put() says so).
                    if not (slots.starved() or stop.is_set() or blocks.clock() - began >= blocks.seconds):
                        continue
                put(_Block(reading, first, block))
                first, block = position, []
        except Stopped:
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
                    stream.flush_consumed()  # the end, found by a sibling: no take of this slot will carry it
                    break
                reading = _Reading(stream, lease)
                with readings_lock:
                    readings[lease.id] = reading
                try:
                    if not read_item(reading):
                        return  # the consumer raises the reader's error: this slot takes nothing more
                    while not reading.finished.wait(_PUT_POLL):  # the consumer's turn: see the module's text
                        if stop.is_set():
                            raise Stopped
                    # Acknowledged by the slot's next take (or before its wait for a turn: Slots.next).
                except Stopped:
                    if out(reading):  # leased as the consumer closed: given back here
                        reading.stop()
                    raise
                finally:
                    slots.done()
        except Stopped:
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
    # With blocks: records received (claimed) and not yet handed over.
    hand: list = []

    def handed() -> Iterator[list]:
        """The records in hand as one block; the loop's time until it asks again sizes the next."""
        block = hand.copy()
        hand.clear()
        meter.got()
        at = blocks.clock()
        yield block
        blocks.taken(len(block), blocks.clock() - at)
        meter.wait()

    meter.wait()
    try:
        while running:
            try:
                message = buffer.get_nowait()
            except queue_module.Empty:
                if hand:  # what is here goes now, rather than wait for more
                    yield from handed()
                    continue
                slots.starving()
                try:
                    message = buffer.get()
                finally:
                    slots.fed()
            if hand and not isinstance(message, _Block):
                yield from handed()  # an item's end or an error comes after the records before it
            if message is None:
                running -= 1
            elif isinstance(message, _Block):
                for offset, record in enumerate(message.records):
                    if message.first is not None and not message.reading.claim(message.first + offset):
                        break  # read ahead past a split: dropped, the remainder's holder reads it
                    if blocks is not None:
                        hand.append(record)
                        if len(hand) >= blocks.size():
                            yield from handed()
                        continue
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
        if primary is not None:
            # First: a slot waiting on a take ahead in flight wakes, and what
            # the look-ahead took and the slot did not start goes back unread.
            primary.close()
        # Slots blocked on a full buffer or waiting for their turn see the
        # stop within _PUT_POLL; one in the middle of a request finishes it
        # first. The slot in a take that may wait on the server for work is
        # not waited for: every sibling had received its items whole, so it
        # can bring nothing this close gives back, and it gives back what it
        # brings when it returns. Past the deadline, a slot is left to end on
        # its own.
        deadline = time.monotonic() + _CLOSE_SECONDS
        while time.monotonic() < deadline:
            busy = [
                thread for thread, stream in zip(threads, streams) if thread.is_alive() and stream is not slots.waiting
            ]
            if not busy:
                break
            _drain(buffer)  # a slot blocked on a full buffer puts, and sees the stop
            # Joined, not waited for on the buffer: at the queue's end every
            # slot has put its last message and only has to return, and a
            # wait on the empty buffer added _PUT_POLL to every loop's end.
            busy[0].join(_JOIN_POLL)
        # What the consumer did not receive whole goes back; what it did is acknowledged.
        with readings_lock:
            left = list(readings.values())
            readings.clear()
        for reading in left:
            reading.stop()
        for stream in streams:
            stream.flush_consumed()
