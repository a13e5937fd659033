"""TensorFlow side of WorkQueue: take, input_dataset, input_producer, add_summary.

Everything here runs the SDK's Python leasing through ``py_func`` /
``from_generator``, so the same queue object works eagerly, in
``tf.function`` and in TF1 graphs under ``MonitoredTrainingSession``.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from ._tf_import import require
from .queue import QueueExhausted, WorkQueue, _Stream, exhausted_message

tf = require("WorkQueue's TensorFlow methods")

from . import checkpoint  # noqa: E402  (needs TensorFlow too)


def _track(queue: WorkQueue) -> None:
    """Makes the queue checkpointable: trackable for tf.train.Checkpoint, and a
    SaveableObject of the current graph for TF1 Savers."""
    checkpoint.make_trackable(queue)
    if not tf.executing_eagerly() and not tf.inside_function():
        checkpoint.register_saveable(queue)


def _out_of_range(queue: WorkQueue):
    return tf.errors.OutOfRangeError(None, None, exhausted_message(queue.name))


def _next_bytes(stream: _Stream) -> bytes:
    try:
        return stream.next().item.encode()
    except QueueExhausted:
        raise _out_of_range(stream.queue) from None


def _py_take(stream: _Stream) -> bytes:
    # Inside py_func only StopIteration becomes an OutOfRangeError (which a
    # QueueRunner and MonitoredSession treat as the end of input); any other
    # exception class would arrive as UnknownError.
    try:
        return stream.next().item.encode()
    except QueueExhausted:
        raise StopIteration(exhausted_message(stream.queue.name)) from None


def take(queue: WorkQueue):
    _track(queue)
    if tf.executing_eagerly():
        # Each call hands over the next item; the previous one is done.
        return tf.constant(_next_bytes(queue._default_stream()))
    stream = _Stream(queue, lag=1)
    with tf.name_scope(queue.name):
        work = tf.compat.v1.py_func(lambda: _py_take(stream), [], tf.string, stateful=True, name="take")
    work.set_shape([])
    return work


def input_dataset(queue: WorkQueue):
    _track(queue)
    def generate():
        # A new stream per iteration of the dataset: each element is completed
        # when the dataset's consumer (TextLineDataset, a map...) pulls the next.
        stream = _Stream(queue, lag=1)
        try:
            while True:
                try:
                    yield stream.next().item.encode()
                except QueueExhausted:
                    return
        except GeneratorExit:
            stream.abort("the dataset was closed before this item was read")
            raise

    return tf.data.Dataset.from_generator(generate, output_signature=tf.TensorSpec(shape=[], dtype=tf.string))


def input_producer(queue: WorkQueue):
    _track(queue)
    if tf.executing_eagerly():
        raise RuntimeError("input_producer() builds a queue runner for TF1 graphs; use input_dataset() eagerly")
    # The runner leases item k+2 only after the reader took item k+1 from the
    # capacity-1 queue, i.e. once it has finished item k: so a lease is
    # completed two takes later (lag 2). The last two are completed when the
    # session's readers finish (WorkQueue.close(), run at normal exit).
    stream = _Stream(queue, lag=2)
    with tf.name_scope(queue.name):
        work = tf.compat.v1.py_func(lambda: _py_take(stream), [], tf.string, stateful=True, name="take")
        work.set_shape([])
        proxy = tf.queue.FIFOQueue(capacity=1, dtypes=[tf.string], shapes=[tf.TensorShape([1])], name="proxy")
        enqueue = proxy.enqueue(tf.reshape(work, [1]))
        cancel = proxy.close(cancel_pending_enqueues=True)
        runner = tf.compat.v1.train.QueueRunner(proxy, [enqueue], cancel_op=cancel)
        tf.compat.v1.train.add_queue_runner(runner)
    return proxy


class _Watermarks:
    """Watermarks fetched at most once a second, whatever the number of summary ops."""

    def __init__(self, queue: WorkQueue):
        self.queue = queue
        self.lock = threading.Lock()
        self.at = 0.0
        self.values = (0.0, 0.0, 0.0, 0.0)

    def get(self):
        with self.lock:
            if time.monotonic() - self.at > 1.0:
                marks = self.queue.watermarks()
                capacity = max(1, marks["items_per_epoch"])
                remaining = marks["pending"]
                self.values = (remaining / capacity, float(marks["done"]), float(marks["leased"]), float(remaining))
                self.at = time.monotonic()
            return self.values


def add_summary(queue: WorkQueue):
    """``<name>/fraction_of_<capacity>_full`` as DeepRec (items left / items per epoch), plus done, leased, pending."""
    capacity = queue.num_slices if queue.num_slices else len(queue.works)
    names = [f"fraction_of_{capacity}_full", "done", "leased", "pending"]
    watermarks = _Watermarks(queue)
    if tf.executing_eagerly():
        step = tf.summary.experimental.get_step()
        for name, value in zip(names, watermarks.get()):
            tf.summary.scalar(f"{queue.name}/{name}", value, step=step if step is not None else 0)
        return None
    with tf.name_scope(queue.name):
        values = tf.compat.v1.py_func(
            lambda: [np.float32(v) for v in watermarks.get()],
            [], [tf.float32] * 4, stateful=True, name="watermarks",
        )
    for name, value in zip(names, values):
        value.set_shape([])
        tf.compat.v1.summary.scalar(f"{queue.name}/{name}", value)
    return None


def interleaved_dataset(queue: WorkQueue, reader, cycle_length: int, block_length: int, output_signature):
    from . import readers

    reader = reader or readers.records
    signature = output_signature or tf.TensorSpec(shape=[], dtype=tf.string)
    open_leases = {}  # lease id -> (stream, lease), for the record generators

    def leases():
        # A stream that never completes on its own: each item is completed by
        # its record generator when the item's records run out.
        stream = _Stream(queue, lag=2**31)
        while True:
            try:
                lease = stream.next()
            except QueueExhausted:
                return
            open_leases[lease.id] = (stream, lease)
            yield lease.id

    def records_of(lease_id):
        stream, lease = open_leases.pop(int(lease_id))
        try:
            yield from reader(lease.item, lease.offset)
        except GeneratorExit:
            stream.settle(lease, "the dataset was closed before this item was read")
            raise
        except Exception as exc:
            stream.settle(lease, f"{type(exc).__name__}: {exc}")
            raise
        stream.settle(lease)

    ids = tf.data.Dataset.from_generator(leases, output_signature=tf.TensorSpec(shape=[], dtype=tf.int64))
    return ids.interleave(
        lambda lease_id: tf.data.Dataset.from_generator(records_of, args=(lease_id,), output_signature=signature),
        cycle_length=cycle_length,
        block_length=block_length,
        num_parallel_calls=cycle_length,
        deterministic=False,
    )
