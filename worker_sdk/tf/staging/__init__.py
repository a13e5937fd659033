"""Asynchronous staging of input features: ``staged`` and ``make_prefetch_hook``.

This is Shardline's port of DeepRec's ``tf.staged`` / ``tf.make_prefetch_hook``
to stock TensorFlow.  ``staged(features)`` moves the computation of
``features`` (reading, parsing, hashing, ...) off the training step: producer
threads run it ahead of time into a bounded buffer, and the tensors returned by
``staged`` take one buffered element per ``session.run``.  The producers are
started and stopped by the hook from ``make_prefetch_hook()``::

    xx = staged([v0, v1])                      # a list in, a (mutable) list out
    target = model(xx)
    with tf.compat.v1.train.MonitoredTrainingSession(
            hooks=[make_prefetch_hook()]) as sess:
        while not sess.should_stop():
            sess.run(target)

In eager code (or inside ``tf.function``) ``staged`` takes a ``tf.data.Dataset``
or iterator and returns an iterator that keeps ``capacity`` elements ready on
the device; no hook is involved.

Graph-mode design (why it is built this way):

* The buffer is a ``FIFOQueue`` of ``capacity`` elements.  Queues give the three
  properties the contract needs and ``StagingArea`` lacks: a blocked put can be
  cancelled at shutdown, a closed queue hands out what it holds and then raises
  ``OutOfRangeError``, and every blocking call is cancellable by the session.
  When a GPU is visible the queue is placed on it (stock TF registers the queue
  kernels for every device and keeps only the handle, strings and int32 in
  host memory), so the producer's put performs the one host-to-device copy of
  each element and the consumer's take reads device memory.
* Every element carries two extra scalars, an error code and a message.  A
  producer that hits an error it must not swallow puts error markers into the
  stream, so the consumer receives the elements produced before the failure and
  then an error: an error can never be lost behind a full buffer, and a
  consumer blocked in its take is woken by it.  The take checks the code with
  a ``tf.cond``; only an error marker enters Python (to raise), so a normal
  take costs no Python call.
* ``timeout_millis`` cannot be a run timeout on the put: a timed-out step
  would drop the element it computed.  A watchdog thread per stage warns
  instead, when a put has been in flight that long while the buffer is full.
* The take first asserts that a producer has been started for this session (a
  token the hook puts into a tiny side queue).  Without the hook the very first
  take fails at once with an error naming ``make_prefetch_hook()`` instead of
  blocking forever on a buffer that nobody fills.  A run timeout cannot do
  this job: it would have to be set on every call the user makes.
* Stages are recorded per graph by tensor *names* (``graph.Stage``), outside
  graph collections: collections would be exported into every checkpoint's
  MetaGraphDef (with a warning for an unserialisable type), and op references
  kept in a module-level map would keep every graph alive.

Modules, by concern: ``errors`` (which exceptions close, skip or fail, and how
they cross into TensorFlow), ``graph`` (building a buffer and recording its
stage), ``runner`` (producer threads, watchdog, ``make_prefetch_hook``),
``eager`` (``tf.data`` sources); ``staged`` itself is here.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Mapping

import tensorflow as tf

from .eager import is_dataset_source, staged_dataset
from .errors import ExceptionTypes
from .graph import staged_graph
from .runner import make_prefetch_hook

__all__ = ["staged", "make_prefetch_hook"]

logger = logging.getLogger(__name__)

_NO_FEEDS: Mapping = types.MappingProxyType({})


def staged(
    features,
    feed_dict=_NO_FEEDS,
    capacity=1,
    num_threads=1,
    num_clients=1,
    timeout_millis=300000,
    closed_exception_types=(tf.errors.OUT_OF_RANGE,),
    ignored_exception_types=(),
    use_stage_subgraph_thread_pool=False,
    stage_subgraph_thread_pool_id=0,
    stage_subgraph_stream_id=0,
    name=None,
):
    """Prefetches ``features`` asynchronously and returns the prefetched values.

    Graph mode (``tf.compat.v1``): ``features`` is a tensor, a ``SparseTensor``
    or a nest (list, tuple, dict) of them.  The result has the same structure
    (a list in gives a new, mutable list out) and the same static shapes; each
    ``session.run`` that evaluates it takes one element from a buffer of
    ``capacity`` elements that ``num_threads`` producer threads fill by running
    the subgraph behind ``features``.  The session must carry
    ``make_prefetch_hook()``: it starts the producers after the session is
    created and stops them when it ends.  Without it the first take raises an
    error that says so (DeepRec hangs instead).

    How producer errors are handled:

    * ``closed_exception_types`` end the producer thread that raised them.
      When every producer has ended the buffer closes: consumers take what is
      buffered, then get ``OutOfRangeError``.
    * ``ignored_exception_types`` skip the element (one warning line) and the
      producer goes on.
    * Any other error ends production and reaches the consumers in order: they
      first take the elements buffered before the failure, then the take
      raises.  Its message names the original error; the class is kept for
      ``InvalidArgumentError``, ``ResourceExhaustedError``,
      ``UnimplementedError`` and ``UnknownError`` and is ``UnknownError``
      otherwise (TensorFlow's py_function bridge carries no other codes).
      Under ``MonitoredSession`` the original exception, with its class, is
      also reported to the coordinator: ``should_stop()`` and ``close()``
      re-raise it, and preemption errors trigger the usual session recovery.

    Differences from DeepRec:

    * ``timeout_millis``: a put still waiting on a full buffer after this long
      logs a warning naming the stage and keeps waiting with its element.
      DeepRec gives up on the element; Shardline never drops data silently.
    * ``stage_subgraph_stream_id`` other than 0 only logs a warning: stock
      TensorFlow runs all compute of a GPU on one stream.

    Eager mode and ``tf.function``: ``features`` is a ``tf.data.Dataset`` or
    iterator, and the result is an iterator that keeps ``capacity`` elements
    prefetched (copied to the GPU ahead of time when one is visible and every
    component can live there).  The exception types apply the same way:
    closed ones end the iteration, ignored ones skip an element, others are
    raised by ``next()``.  Unless they are the defaults (or the source is an
    iterator), elements pass through a Python generator to be classified,
    which costs one Python call per element.  ``feed_dict``, ``num_threads``,
    ``num_clients``, ``timeout_millis`` and the thread-pool and stream
    arguments are graph-mode only.

    Args:
      features: The tensors to prefetch (graph mode), or a ``tf.data.Dataset``
        or iterator (eager mode and ``tf.function``).
      feed_dict: Maps placeholders (``tf.Tensor`` or ``tf.SparseTensor``) of the
        features' subgraph to tensors of the same graph; each iteration
        evaluates the values and feeds them to the producer's run.
      capacity: Number of elements the buffer holds.
      num_threads: Number of producer threads.  With one, elements keep their
        order; with more, each element is still taken exactly once.
      num_clients: Number of consumers taking from the buffer concurrently;
        each of them receives a producer's error.
      timeout_millis: How long a put may wait on a full buffer before a
        warning is logged (the element is kept).
      closed_exception_types: Error codes (``tf.errors.OUT_OF_RANGE``) or
        exception classes (``tf.errors.OutOfRangeError``) that end a producer.
      ignored_exception_types: Error codes or classes that skip an element.
      use_stage_subgraph_thread_pool: Run the producers' ``session.run`` on an
        inter-op pool from ``ConfigProto.session_inter_op_thread_pool``.
      stage_subgraph_thread_pool_id: Index of that pool
        (``RunOptions.inter_op_thread_pool``; -1 runs on the caller's thread).
      stage_subgraph_stream_id: GPU stream for the producers (see above).
      name: Name scope of the staging ops (default ``"staged"``, uniquified).

    Returns:
      The prefetched features, structured like ``features``; in eager mode an
      iterator over the prefetched elements.

    Raises:
      TypeError: if the arguments have the wrong types, or ``features`` are
        eager tensors (stage a ``tf.data.Dataset`` instead).
      ValueError: for out-of-range arguments, or an exception type both closed
        and ignored.
    """
    for argument, value, minimum in (
        ("capacity", capacity, 1),
        ("num_threads", num_threads, 1),
        ("num_clients", num_clients, 1),
        ("timeout_millis", timeout_millis, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"staged: {argument} must be an int, got {value!r}")
        if value < minimum:
            raise ValueError(f"staged: {argument} must be >= {minimum}, got {value}")
    if (
        isinstance(stage_subgraph_thread_pool_id, bool)
        or not isinstance(stage_subgraph_thread_pool_id, int)
        or stage_subgraph_thread_pool_id < -1
    ):
        raise ValueError("staged: stage_subgraph_thread_pool_id must be an int >= -1")
    closed = ExceptionTypes(closed_exception_types, "closed_exception_types")
    ignored = ExceptionTypes(ignored_exception_types, "ignored_exception_types")
    if closed.overlaps(ignored):
        raise ValueError("staged: an exception type cannot be both closed and ignored")
    if stage_subgraph_stream_id:
        logger.warning(
            "staged: stage_subgraph_stream_id=%r ignored: stock TensorFlow runs a GPU's compute on a single stream",
            stage_subgraph_stream_id,
        )

    if is_dataset_source(features):
        if not tf.executing_eagerly() and not tf.inside_function():
            raise TypeError(
                "staged: a tf.data source needs eager mode or tf.function; in a "
                "tf.compat.v1 graph stage the tensors of iterator.get_next()"
            )
        if feed_dict:
            raise ValueError("staged: feed_dict applies to graph mode only")
        if num_threads != 1 or num_clients != 1 or use_stage_subgraph_thread_pool:
            logger.warning(
                "staged: num_threads, num_clients and the thread pool apply to graph "
                "mode only; tf.data parallelism is set on the dataset itself"
            )
        return staged_dataset(features, capacity, closed, ignored, name)

    if tf.executing_eagerly() or tf.inside_function():
        raise TypeError(
            "staged: in eager mode or tf.function, pass a tf.data.Dataset or iterator; "
            "tensors are staged in tf.compat.v1 graph mode"
        )
    pool = stage_subgraph_thread_pool_id if use_stage_subgraph_thread_pool else None
    return staged_graph(
        features, feed_dict, capacity, num_threads, num_clients, timeout_millis, closed, ignored, pool, name
    )
