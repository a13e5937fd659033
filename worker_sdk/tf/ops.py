"""WorkQueue's TensorFlow methods: take, input_dataset, input_producer, add_summary, dataset.

Everything here runs the SDK's Python leasing through ``py_func`` /
``from_generator``, so the same queue object works eagerly, in
``tf.function`` and in TF1 graphs under ``MonitoredTrainingSession``. Only
the queue's public API is used.

Data stall (worker_sdk.stall): the training loop's wait is counted where
Python sees the loop receive data. A dataset's is its generator's boundary:
tf.data resumes the generator when the pipeline downstream asks for an
element, so the time until it yields is that pipeline's wait on Shardline's
data, and the time until it asks again is the rest of the step. The loop's
own iterator is the user's, out of reach. tf.data adds a prefetch by itself
(autotune), so this is mostly the prefetch thread's wait: a starved loop
reads high (0.96 where the loop itself waited 0.77 of its time, a reader 4x
its model), a fed one low, and the order of loops, which says who is
starved, holds. Graph-mode ``take()`` runs inside the loop's
``session.run``: its wait is the loop's wait for an item.
``input_producer()`` counts its runner's waits for works against its waits
for the reader: the reader's records are read inside TensorFlow's reader
op, where Python sees nothing.
"""

from __future__ import annotations

import threading
import time
from contextlib import closing
from typing import TYPE_CHECKING

import numpy as np

from .. import look_ahead, stall
from ..queue_end import QueueExhausted, exhausted_message
from ..stream import Stream
from ..taker import Taker
from ._require import require

tf = require("WorkQueue's TensorFlow methods")

from . import blocks, checkpoint  # noqa: E402  (needs TensorFlow too)

if TYPE_CHECKING:
    from ..queue import WorkQueue


def _track(queue: WorkQueue) -> None:
    """Makes the queue checkpointable: trackable for tf.train.Checkpoint, and a
    SaveableObject of the current graph for TF1 Savers."""
    checkpoint.make_trackable(queue)
    if not tf.executing_eagerly() and not tf.inside_function():
        checkpoint.register_saveable(queue)


def _next_bytes(taker: Taker) -> bytes:
    try:
        return taker.next().item.encode()
    except QueueExhausted:
        raise tf.errors.OutOfRangeError(None, None, exhausted_message(taker.stream.name)) from None


def _py_take(taker: Taker) -> bytes:
    # Inside py_func only StopIteration becomes an OutOfRangeError (which a
    # QueueRunner and MonitoredSession treat as the end of input); any other
    # exception, JobCancelledError included, arrives as an UnknownError whose
    # message starts with its class name: never mistaken for the end.
    try:
        return taker.next().item.encode()
    except QueueExhausted:
        raise StopIteration(exhausted_message(taker.stream.name)) from None


def take(queue: WorkQueue):
    _track(queue)
    if tf.executing_eagerly():
        # Each call hands over the next item; the previous one is done.
        return tf.constant(_next_bytes(queue.consumers.default_taker()))
    taker = queue.consumers.taker()
    with tf.name_scope(queue.name):
        work = tf.compat.v1.py_func(lambda: _py_take(taker), [], tf.string, stateful=True, name="take")
    work.set_shape([])
    return work


def input_dataset(queue: WorkQueue):
    _track(queue)

    def generate():
        # A new stream per iteration of the dataset: each element is completed
        # when the dataset's consumer (TextLineDataset, a map...) pulls the
        # next, and the next is leased ahead meanwhile (WorkQueue's look_ahead).
        # Closed early, the dataset gives back the item in hand for another
        # attempt and what was taken ahead unread.
        stream = queue.consumers.whole_items_stream()
        leases = look_ahead.leases(stream, queue.look_ahead, most=queue.look_ahead_most)
        with closing(stall.timed(leases, stream.meter)) as leases:
            for lease in leases:
                yield lease.item.encode()

    return _ending_at_once(
        tf.data.Dataset.from_generator(generate, output_signature=tf.TensorSpec(shape=[], dtype=tf.string))
    )


def _ending_at_once(dataset, options=None):
    """``dataset`` without tf.data's autotuning, whose thread held the end of the input for seconds.

    At the end of a generator's data, TensorFlow 2.21 joins the autotuning
    thread of the pipeline, asleep between its rounds: a dataset() loop's
    OutOfRange came 3-15 s after the queue's end in most runs of
    bench/shapes.py, and within 0.2 s with autotuning off. A user's
    own options set later take precedence (autotune.enabled = True brings it
    back, at that cost); AUTOTUNE in their map and prefetch still works.
    """
    options = options or tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


# The item a failed runner hands its readers instead of a work: the proxy's
# dequeues raise the failure when they meet it (ProxyQueue), and a reader
# given it as a file name fails with a message that names the failure.
FAILED_PREFIX = b"shardline: the work queue's runner failed: "


class _RunnerTake:
    """input_producer's take, and what it does when a take fails (a cancelled job, a spec conflict).

    Under a Coordinator (MonitoredSession, ``start_queue_runners(coord=...)``)
    it raises: the runner hands the error to the Coordinator, which closes the
    proxy and has the session raise that error. Without one, a runner that
    raises dies alone and the proxy stays open, so the training loop would
    wait for good: the error then becomes one failure item, then the end, and
    the proxy's dequeues raise it (ProxyQueue).
    """

    def __init__(self, stream: Stream):
        # Taken when the runner asks, never ahead: the proxy queue holds the
        # items the reader has not reached (the stream's lag counts them).
        self.taker = Taker(stream, 0)
        self.coordinated = False  # set by the runner's create_threads
        self.failed = False

    def __call__(self) -> bytes:
        if self.failed:
            raise StopIteration("the work queue's runner failed")
        try:
            return _py_take(self.taker)
        except StopIteration:
            raise
        except Exception as exc:
            if self.coordinated:
                raise
            self.failed = True
            return FAILED_PREFIX + f"{type(exc).__name__}: {exc}".encode()


class _Runner(tf.compat.v1.train.QueueRunner):
    """A QueueRunner that tells its take whether a Coordinator watches its threads."""

    def __init__(self, take: _RunnerTake, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.take = take

    def create_threads(self, sess, coord=None, daemon=False, start=False):
        self.take.coordinated = coord is not None
        return super().create_threads(sess, coord=coord, daemon=daemon, start=start)


def _raise_failure(works: np.ndarray, least: np.ndarray) -> np.ndarray:
    for work in works.reshape(-1):
        if work.startswith(FAILED_PREFIX):
            raise RuntimeError(work[len(FAILED_PREFIX) :].decode(errors="replace"))
    if len(works) < least:
        # dequeue_many's own answer to a closed queue with fewer elements left.
        raise StopIteration(f"the queue is closed and has fewer than {int(least)} elements left")
    return works


class ProxyQueue(tf.queue.FIFOQueue):
    """input_producer's proxy: a FIFOQueue whose dequeues raise the runner's failure instead of returning it.

    ``dequeue_many(n)`` is ``dequeue_up_to(n)`` checked: on a closed queue
    holding the failure and fewer than n elements, the plain op would raise
    OutOfRange (the end of the data) and hide the failure.
    """

    def _checked(self, works, least: int = 0):
        checked = tf.compat.v1.py_func(
            _raise_failure, [works, np.int64(least)], tf.string, stateful=False, name="check_runner"
        )
        checked.set_shape(works.shape if not least else [least, *works.shape[1:]])
        return checked

    def dequeue(self, name=None):
        return self._checked(super().dequeue(name=name))

    def dequeue_many(self, n, name=None):
        return self._checked(super().dequeue_up_to(n, name=name), least=n)

    def dequeue_up_to(self, n, name=None):
        return self._checked(super().dequeue_up_to(n, name=name))


def input_producer(queue: WorkQueue):
    _track(queue)
    if tf.executing_eagerly():
        raise RuntimeError("input_producer() builds a queue runner for TF1 graphs; use input_dataset() eagerly")
    # The runner's take of item k+3 runs right after its enqueue of item k+2
    # went through, i.e. once the reader dequeued item k+1 from the capacity-1
    # queue, which it does only when it has finished item k: so item k is
    # acknowledged with the take of k+3 (lag 3). At the end the stream holds
    # the items still in the reader and the queue; they are acknowledged when
    # the session's readers have finished (WorkQueue.close(), run at normal
    # exit), and meanwhile the server knows this worker is at its end.
    runner_take = _RunnerTake(queue.consumers.stream(lag=3))
    with tf.name_scope(queue.name):
        work = tf.compat.v1.py_func(runner_take, [], tf.string, stateful=True, name="take")
        work.set_shape([])
        proxy = ProxyQueue(capacity=1, dtypes=[tf.string], shapes=[tf.TensorShape([1])], name="proxy")
        enqueue = proxy.enqueue(tf.reshape(work, [1]))
        cancel = proxy.close(cancel_pending_enqueues=True)
        runner = _Runner(runner_take, proxy, [enqueue], cancel_op=cancel)
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
            [],
            [tf.float32] * 4,
            stateful=True,
            name="watermarks",
        )
    for name, value in zip(names, values):
        value.set_shape([])
        tf.compat.v1.summary.scalar(f"{queue.name}/{name}", value)
    return None


def interleaved_dataset(
    queue: WorkQueue, reader, cycle_length: int, block_length: int, output_signature, hand_over_seconds: float = 0.0
):
    from .. import readers
    from ..interleave import interleave

    if reader is None:
        read = readers.of_lease
    else:

        def read(lease):
            return reader(lease.item, lease.offset)

    signature = output_signature or tf.TensorSpec(shape=[], dtype=tf.string)

    def records(sizer=None):
        return interleave(
            lambda: queue.consumers.stream(lag=None, tracks=True),
            read,
            cycle_length,
            block_length,
            queue.look_ahead,
            sizer,
            most=queue.look_ahead_most,
        )

    if hand_over_seconds:  # 0 or None: one record at a time
        dataset = blocks.in_blocks(records, signature, hand_over_seconds)
    else:
        dataset = tf.data.Dataset.from_generator(records, output_signature=signature)
    # A record counts as read when the generator hands it to TensorFlow
    # (worker_sdk.interleave): the prefetch tf.data would inject after it
    # holds records the model has not reached, which a split cannot take back.
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    return _ending_at_once(dataset, options)
