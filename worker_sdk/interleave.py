"""Several leased items read at once, their records merged: WorkQueue.dataset()'s engine.

Each of ``cycle_length`` slots is a thread with its own stream: it leases an
item, reads its records into a shared buffer (``block_length`` at a time)
and acknowledges the item when the reader is done, then leases the next. A
slot that finds nothing waits at the end of the queue holding nothing, while
the other slots go on reading.

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
from typing import Callable, Iterable, Iterator

from . import stall
from .protocol import Lease
from .stream import QueueExhausted, Stream

_PUT_POLL = 0.1  # seconds between checks for a closed consumer while the buffer is full
_CLOSE_SECONDS = 30.0


class _Stop(Exception):
    """The consumer closed the dataset: a slot stops where it is."""


def interleave(
    new_stream: Callable[[], Stream],
    read: Callable[[Lease], Iterable],
    cycle_length: int,
    block_length: int,
) -> Iterator:
    """Yields the records of leased items (``read(lease)``), ``cycle_length`` items read at a time."""
    if cycle_length < 1 or block_length < 1:
        raise ValueError(f"cycle_length and block_length must be >= 1, not {cycle_length} and {block_length}")
    buffer: queue_module.Queue = queue_module.Queue(maxsize=2 * cycle_length)
    stop = threading.Event()
    streams = [new_stream() for _ in range(cycle_length)]

    def put(message) -> None:
        while not stop.is_set():
            try:
                buffer.put(message, timeout=_PUT_POLL)
                return
            except queue_module.Full:
                continue
        raise _Stop

    def slot(stream: Stream) -> None:
        try:
            while True:
                try:
                    lease = stream.next()
                except QueueExhausted:
                    break
                block = []
                records = stream.records(lease, read(lease))
                try:
                    for record in records:
                        block.append(record)
                        if len(block) == block_length:
                            put(block)
                            block = []
                finally:
                    records.close()  # on _Stop: the item goes back for another attempt
                if block:
                    put(block)
        except _Stop:
            pass
        except BaseException as exc:  # the reader's error (its item is failed) reaches the consumer
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
            message = buffer.get()
            if message is None:
                running -= 1
            elif isinstance(message, BaseException):
                raise message
            else:
                for record in message:
                    meter.got()
                    yield record
                    meter.wait()
        meter.got()  # the wait that found the end is the consumer's too
    finally:
        meter.stop()
        stop.set()
        for stream in streams:
            stream.stop()
        # Slots blocked on a full buffer see the stop within _PUT_POLL and
        # give their items back; one in the middle of a request finishes it
        # first. A slot in a take, which may wait on the server for work,
        # holds no item to give back yet: it is not waited for, and gives back
        # what the take brings when it returns. Past the deadline, a slot is
        # left to end on its own.
        deadline = time.monotonic() + _CLOSE_SECONDS
        while (
            any(thread.is_alive() and not stream.taking for thread, stream in zip(threads, streams))
            and time.monotonic() < deadline
        ):
            try:
                buffer.get(timeout=_PUT_POLL)
            except queue_module.Empty:
                pass
