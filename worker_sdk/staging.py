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
* Stages are recorded per graph by tensor *names* (``_Stage``), outside graph
  collections: collections would be exported into every checkpoint's
  MetaGraphDef (with a warning for an unserialisable type), and op references
  kept in a module-level map would keep every graph alive.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import threading
import time
import types
import weakref
from collections.abc import Mapping

import tensorflow as tf

# Only internal module used: it holds the one FIFOQueue class whose resource
# can live on a GPU (the public one is pinned to the CPU).
from tensorflow.python.ops import data_flow_ops

__all__ = ["staged", "make_prefetch_hook"]

logger = logging.getLogger(__name__)

_OK = 0
_NO_FEEDS: Mapping = types.MappingProxyType({})
# Upper bound on how long the hook's end() waits for a producer that is blocked
# upstream of the buffer (for example in a reader); such a producer is stopped
# by the session's own close, which follows end() in MonitoredSession.
_END_JOIN_TIMEOUT_S = 5.0
# Watchdog polling bounds for timeout_millis: fine enough for short timeouts in
# tests, coarse enough to cost nothing with the 5 minute default.
_WATCHDOG_MIN_INTERVAL_S = 0.01
_WATCHDOG_MAX_INTERVAL_S = 1.0


# --------------------------------------------------------------------------
# Exception classification
# --------------------------------------------------------------------------

_ERROR_CODES = frozenset(
    getattr(tf.errors, code_name) for code_name in dir(tf.errors) if code_name.isupper() and code_name != "OK"
)


class _ExceptionTypes:
    """A set of exception types given as TF error codes or exception classes."""

    def __init__(self, types_, argument):
        codes = set()
        classes = []
        for item in types_:
            if isinstance(item, bool):
                raise TypeError(f"{argument}: {item!r} is neither an error code nor an exception class")
            if isinstance(item, int):
                if item not in _ERROR_CODES:
                    raise ValueError(f"{argument}: {item} is not a tf.errors error code")
                codes.add(item)
            elif isinstance(item, type) and issubclass(item, BaseException):
                if issubclass(item, tf.errors.OpError) and item is not tf.errors.OpError:
                    codes.add(tf.compat.v1.errors.error_code_from_exception_type(item))
                else:
                    classes.append(item)
            else:
                raise TypeError(f"{argument}: {item!r} is neither an error code nor an exception class")
        self.codes = frozenset(codes)
        self.classes = tuple(classes)

    def __bool__(self):
        return bool(self.codes or self.classes)

    def matches(self, exc):
        if isinstance(exc, tf.errors.OpError) and exc.error_code in self.codes:
            return True
        return isinstance(exc, self.classes)

    def overlaps(self, other):
        return bool(self.codes & other.codes) or bool(set(self.classes) & set(other.classes))


# Errors raised inside tf.data functions start with "{{function_node ...}} ".
_FUNCTION_NODE_PREFIX = re.compile(r"^(\{\{[^}]*\}\}\s*)+")
# Lines Session.run adds around the cause of an error: a header, where the
# failing node was defined, and node tags.
_ERROR_CONTEXT_LINE = re.compile(r"^(Graph execution error:|Detected at node .*|File \".*|Node: '.*'|\[\[.*\]\])$")


def _describe(exc):
    """One line naming an exception: ``ClassName: first line of its message``."""
    if isinstance(exc, tf.errors.OpError):
        text = exc.message
    else:
        text = str(exc)
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not _ERROR_CONTEXT_LINE.match(line)]
    first = _FUNCTION_NODE_PREFIX.sub("", lines[0]) if lines else ""
    return f"{type(exc).__name__}: {first}".rstrip(": ")


def _error_code(exc):
    return exc.error_code if isinstance(exc, tf.errors.OpError) else tf.errors.UNKNOWN


def _bridged_exception(code, message):
    """The Python exception to raise inside a py_function / generator.

    TensorFlow maps a Python exception escaping a py_function to a status by
    its Python class only (an ``OpError`` becomes ``UNKNOWN``).  These are the
    classes that come out with the original code.  ``OUT_OF_RANGE`` is
    deliberately not bridged: a producer's OutOfRange reaches here only when
    the caller excluded it from ``closed_exception_types``, and re-raising it as
    OutOfRange would make ``MonitoredSession`` treat it as a clean end of data.
    """
    if code == tf.errors.INVALID_ARGUMENT:
        return ValueError(message)
    if code == tf.errors.RESOURCE_EXHAUSTED:
        return MemoryError(message)
    if code == tf.errors.UNIMPLEMENTED:
        return NotImplementedError(message)
    return RuntimeError(message)


def _raise_producer_error(code, message):
    raise _bridged_exception(int(code.numpy()), message.numpy().decode("utf-8", "replace"))


# --------------------------------------------------------------------------
# Graph mode
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Stage:
    """What the hook needs to run one ``staged`` call, by tensor and op name."""

    name: str
    capacity: int
    num_threads: int
    num_clients: int
    timeout_millis: int
    closed: _ExceptionTypes
    ignored: _ExceptionTypes
    inter_op_thread_pool: int | None
    put_op: str
    put_error_op: str
    error_code_feed: str
    error_message_feed: str
    close_op: str
    cancel_op: str
    size_tensor: str
    start_op: str
    feed_keys: tuple[str, ...]
    feed_values: tuple[str, ...]


_stages_lock = threading.Lock()
_stages_by_graph: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Which stages already have producers in which session: two prefetch hooks in
# one session must not start a second set of producers for the same buffer.
_running_by_session: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _register_stage(graph, stage):
    with _stages_lock:
        _stages_by_graph.setdefault(graph, []).append(stage)


def _stages_of(graph):
    with _stages_lock:
        return list(_stages_by_graph.get(graph, ()))


def _claim(session, stage_name):
    with _stages_lock:
        running = _running_by_session.setdefault(session, set())
        if stage_name in running:
            return False
        running.add(stage_name)
        return True


def _visible_gpu():
    gpus = tf.config.list_physical_devices("GPU")
    return "/device:GPU:0" if gpus else None


def _buffer_device(name_scope):
    """The device for the buffer: the caller's device scope, else the first GPU.

    A device the caller chose explicitly wins; otherwise, with a GPU visible,
    the buffer (and therefore the staged outputs) lives on the GPU.
    """
    with tf.compat.v1.name_scope(name_scope):
        probe = tf.no_op(name="device_probe")
    scope_device = tf.DeviceSpec.from_string(probe.device or "")
    if scope_device.device_type is not None:
        return None
    return _visible_gpu()


def _empty_like(tensor):
    # Stands in for a feature in an error marker; never reaches the consumer
    # because the outputs wait for the error check (see _take).
    rank = tensor.shape.rank
    return tf.zeros([0] * (rank if rank else 1), dtype=tensor.dtype)


def _flatten_feed_dict(feed_dict, graph):
    keys, values = [], []
    for key, value in feed_dict.items():
        if isinstance(key, tf.SparseTensor):
            if not isinstance(value, tf.SparseTensor):
                raise TypeError(f"feed_dict: the value for SparseTensor {key!r} must be a tf.SparseTensor")
            pairs = [(key.indices, value.indices), (key.values, value.values), (key.dense_shape, value.dense_shape)]
        elif isinstance(key, tf.Tensor):
            if not isinstance(value, tf.Tensor):
                raise TypeError(
                    f"feed_dict: the value for {key.name} must be a tf.Tensor evaluated each "
                    f"iteration, got {type(value).__name__}"
                )
            pairs = [(key, value)]
        else:
            raise TypeError(f"feed_dict: keys must be placeholders (tf.Tensor or tf.SparseTensor), got {key!r}")
        for k, v in pairs:
            if k.graph is not graph or v.graph is not graph:
                raise ValueError("feed_dict tensors must belong to the same graph as the features")
            keys.append(k.name)
            values.append(v.name)
    return tuple(keys), tuple(values)


def _staged_graph(
    features, feed_dict, capacity, num_threads, num_clients, timeout_millis, closed, ignored, inter_op_thread_pool, name
):
    graph = tf.compat.v1.get_default_graph()
    flat = tf.nest.flatten(features, expand_composites=True)
    leaves = []
    for leaf in flat:
        if leaf is None:
            leaves.append(None)
            continue
        tensor = tf.convert_to_tensor(leaf)
        if tensor.graph is not graph:
            raise ValueError("staged: all features must belong to the default graph")
        if tensor.dtype == tf.resource:
            raise TypeError(f"staged: cannot stage resource tensor {tensor.name}; stage its value")
        leaves.append(tensor)
    tensors = [t for t in leaves if t is not None]
    if not tensors:
        raise ValueError("staged: features contain no tensor to stage")
    feed_keys, feed_values = _flatten_feed_dict(feed_dict, graph)

    # Control dependencies around the call belong to the features, which are
    # already built; inherited by the take they would make every consumer
    # step run the input subgraph again.
    with tf.control_dependencies(None), tf.compat.v1.name_scope(name, default_name="staged") as scope:
        stage_name = scope.rstrip("/")
        device = _buffer_device(scope)

        def placement(dtype=None):
            if not device:
                return contextlib.nullcontext()
            # Strings stay in host memory even in a GPU queue.
            return tf.device("/device:CPU:0" if dtype == tf.string else device)

        dtypes = [tf.int32, tf.string] + [t.dtype for t in tensors]
        # Status values and error-marker stand-ins are built on the host: some
        # of their dtypes (strings) have no GPU kernels to create them with.
        with tf.device("/device:CPU:0"):
            status_ok = [tf.constant(_OK), tf.constant("")]
            code_feed = tf.compat.v1.placeholder(tf.int32, [], name="error_code")
            message_feed = tf.compat.v1.placeholder(tf.string, [], name="error_message")
            stand_ins = [_empty_like(t) for t in tensors]
        with placement():
            # The public tf.queue.FIFOQueue pins its resource to the CPU; this
            # variant leaves placement to the device scope.
            buffer = data_flow_ops.GPUCompatibleFIFOQueue(capacity, dtypes, name="buffer")
            put = buffer.enqueue(status_ok + tensors, name="put")
            put_error = buffer.enqueue([code_feed, message_feed] + stand_ins, name="put_error")
            close = buffer.close(cancel_pending_enqueues=False, name="close")
            cancel = buffer.close(cancel_pending_enqueues=True, name="cancel")
            size = buffer.size(name="size")
        with tf.device("/device:CPU:0"):
            producers = tf.queue.FIFOQueue(2**31 - 1, [tf.bool], shapes=[[]], name="producers")
            start = producers.enqueue(tf.constant(True), name="start")
            hook_present = tf.debugging.Assert(
                producers.size() > 0,
                # Assert escapes quotes in its output, hence none around the name.
                [
                    f"no producer is running for staged buffer {stage_name}. Add "
                    "make_prefetch_hook() to the session hooks, e.g. MonitoredTrainingSession("
                    "hooks=[make_prefetch_hook()]), or call its after_create_session() for a "
                    "plain Session."
                ],
                name="require_prefetch_hook",
            )
        with placement():
            with tf.control_dependencies([hook_present]):
                taken = buffer.dequeue(name="take")
        code, message, components = taken[0], taken[1], taken[2:]
        with tf.device("/device:CPU:0"):
            checked = tf.cond(
                tf.equal(code, _OK),
                lambda: tf.constant(True),
                lambda: tf.py_function(_raise_producer_error, [code, message], tf.bool),
                name="check",
            )
        outputs = []
        with tf.control_dependencies([checked]):
            for source, component in zip(tensors, components):
                with placement(source.dtype):
                    output = tf.identity(component)
                output.set_shape(source.shape)
                outputs.append(output)

    stage = _Stage(
        name=stage_name,
        capacity=capacity,
        num_threads=num_threads,
        num_clients=num_clients,
        timeout_millis=timeout_millis,
        closed=closed,
        ignored=ignored,
        inter_op_thread_pool=inter_op_thread_pool,
        put_op=put.name,
        put_error_op=put_error.name,
        error_code_feed=code_feed.name,
        error_message_feed=message_feed.name,
        close_op=close.name,
        cancel_op=cancel.name,
        size_tensor=size.name,
        start_op=start.name,
        feed_keys=feed_keys,
        feed_values=feed_values,
    )
    _register_stage(graph, stage)

    taken_leaves = iter(outputs)
    restored = [None if leaf is None else next(taken_leaves) for leaf in leaves]
    return tf.nest.pack_sequence_as(features, restored, expand_composites=True)


class _InFlightPut:
    __slots__ = ("started", "warned")

    def __init__(self, started):
        self.started = started
        self.warned = False


class _StageRunner:
    """The producer threads (and a put watchdog) of one stage in one session."""

    def __init__(self, stage, session, coord):
        graph = session.graph
        self.stage = stage
        self.session = session
        self._coord = coord
        self._put = graph.get_operation_by_name(stage.put_op)
        self._put_error = graph.get_operation_by_name(stage.put_error_op)
        self._error_code = graph.get_tensor_by_name(stage.error_code_feed)
        self._error_message = graph.get_tensor_by_name(stage.error_message_feed)
        self._close = graph.get_operation_by_name(stage.close_op)
        self._cancel = graph.get_operation_by_name(stage.cancel_op)
        self._size = graph.get_tensor_by_name(stage.size_tensor)
        self._start = graph.get_operation_by_name(stage.start_op)
        self._feed_keys = [graph.get_tensor_by_name(n) for n in stage.feed_keys]
        self._feed_values = [graph.get_tensor_by_name(n) for n in stage.feed_values]
        self._run_options = None
        if stage.inter_op_thread_pool is not None:
            self._run_options = tf.compat.v1.RunOptions(inter_op_thread_pool=stage.inter_op_thread_pool)

        self._stop = threading.Event()
        self._finished = threading.Event()
        # Guards _live, _failed and _in_flight, which producers and the
        # watchdog update concurrently.
        self._lock = threading.Lock()
        self._live = stage.num_threads
        self._failed = False
        self._in_flight = {}
        self._threads = [
            threading.Thread(
                target=self._produce, args=(index,), daemon=True, name=f"shardline-staged:{stage.name}:producer-{index}"
            )
            for index in range(stage.num_threads)
        ]
        self._watchdog = threading.Thread(
            target=self._watch, daemon=True, name=f"shardline-staged:{stage.name}:watchdog"
        )

    # -- lifecycle ---------------------------------------------------------

    def start(self):
        # The token goes in before any take can run: after_create_session
        # returns before MonitoredSession hands the session to the caller.
        self.session.run(self._start)
        for thread in self._threads:
            thread.start()
        self._watchdog.start()

    def stop(self):
        """Stops the producers, cancelling puts blocked on a full buffer."""
        self._stop.set()
        self._finished.set()
        try:
            self.session.run(self._cancel)
        except (tf.errors.OpError, RuntimeError):
            # The session is already closing; that cancels the puts as well.
            pass
        deadline = time.monotonic() + _END_JOIN_TIMEOUT_S
        for thread in self._threads + [self._watchdog]:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            logger.info(
                "staged %r: %d producer(s) still blocked upstream of the buffer; they stop when the session closes",
                self.stage.name,
                len(alive),
            )

    def alive(self):
        return any(t.is_alive() for t in self._threads)

    # -- producers ---------------------------------------------------------

    def _should_stop(self):
        return self._stop.is_set() or (self._coord is not None and self._coord.should_stop())

    def _shutting_down(self, exc):
        if self._should_stop():
            return True
        # Cancellation only comes from closing the session or cancelling the
        # buffer, i.e. from a shutdown, never from the data.
        if isinstance(exc, tf.errors.CancelledError):
            return True
        # BaseSession exposes no public "closed" flag; a RuntimeError from run()
        # on a closed session is how a shutdown without end() shows up here.
        return isinstance(exc, RuntimeError) and getattr(self.session, "_closed", False)

    def _produce(self, index):
        try:
            while not self._should_stop():
                try:
                    feed = None
                    if self._feed_keys:
                        values = self.session.run(self._feed_values, options=self._run_options)
                        feed = dict(zip(self._feed_keys, values))
                    with self._lock:
                        self._in_flight[index] = _InFlightPut(time.monotonic())
                    try:
                        self.session.run(self._put, feed_dict=feed, options=self._run_options)
                    finally:
                        with self._lock:
                            self._in_flight.pop(index, None)
                except Exception as exc:  # noqa: BLE001 - classified below
                    if self._shutting_down(exc):
                        return
                    if self.stage.closed.matches(exc):
                        logger.debug("staged %r: producer %d finished (%s)", self.stage.name, index, _describe(exc))
                        return
                    if self.stage.ignored.matches(exc):
                        logger.warning("staged %r: skipped an element: %s", self.stage.name, _describe(exc))
                        continue
                    self._fail(exc)
                    return
        finally:
            self._producer_exited()

    def _fail(self, exc):
        with self._lock:
            first = not self._failed
            self._failed = True
        self._stop.set()
        if not first:
            return
        logger.error(
            "staged %r: a producer failed; the consumer receives the elements "
            "buffered before the failure, then this error: %s",
            self.stage.name,
            _describe(exc),
        )
        if self._coord is not None:
            # As a QueueRunner does: MonitoredSession then re-raises the original
            # exception from should_stop() and close(), with its own class, and
            # recovers from preemption errors by recreating the session.
            self._coord.request_stop(exc)
        message = f"staged '{self.stage.name}': a producer failed with {_describe(exc)}"
        feed = {self._error_code: _error_code(exc), self._error_message: message}
        try:
            for _ in range(self.stage.num_clients):
                self.session.run(self._put_error, feed_dict=feed)
        except (tf.errors.OpError, RuntimeError):
            # The buffer was cancelled or the session closed while the markers
            # waited for space: nobody is left to take them.
            pass

    def _producer_exited(self):
        with self._lock:
            self._live -= 1
            last = self._live == 0
        if not last:
            return
        self._finished.set()
        if self._stop.is_set() and not self._failed:
            return
        try:
            # Without cancelling: the consumer drains what is buffered, then
            # gets OutOfRangeError.
            self.session.run(self._close)
        except (tf.errors.OpError, RuntimeError):
            pass

    # -- put watchdog ------------------------------------------------------

    def _watch(self):
        timeout_s = self.stage.timeout_millis / 1000.0
        interval = min(max(timeout_s / 4, _WATCHDOG_MIN_INTERVAL_S), _WATCHDOG_MAX_INTERVAL_S)
        while not self._finished.wait(interval):
            now = time.monotonic()
            with self._lock:
                overdue = [put for put in self._in_flight.values() if not put.warned and now - put.started >= timeout_s]
            if not overdue:
                continue
            try:
                size = self.session.run(self._size)
            except (tf.errors.OpError, RuntimeError):
                return
            if size < self.stage.capacity:
                # Still computing the element, not waiting for space.
                continue
            with self._lock:
                for put in overdue:
                    put.warned = True
            for _ in overdue:
                logger.warning(
                    "staged %r: a put has waited more than %d ms on the full buffer "
                    "(capacity %d); keeping the element and waiting for a consumer",
                    self.stage.name,
                    self.stage.timeout_millis,
                    self.stage.capacity,
                )


class _PrefetchHook(tf.compat.v1.train.SessionRunHook):
    """Starts the producers of every ``staged`` buffer of the session's graph.

    Producers start in ``after_create_session`` and stop in ``end``, which
    cancels puts blocked on a full buffer.  With ``MonitoredSession`` a new
    session (after a preemption) gets fresh producers.  For a plain ``Session``
    call ``after_create_session(session, None)`` after initialising variables
    and ``end(session)`` before closing it.
    """

    def __init__(self):
        # Guards _runners: end() may run on another thread than the one that
        # created the session.
        self._lock = threading.Lock()
        self._runners = []

    def after_create_session(self, session, coord):
        stages = _stages_of(session.graph)
        if not stages:
            logger.warning("make_prefetch_hook(): the session's graph has no staged() features")
        started = []
        for stage in stages:
            if not _claim(session, stage.name):
                logger.warning(
                    "staged %r: producers already running in this session; ignoring a second prefetch hook", stage.name
                )
                continue
            runner = _StageRunner(stage, session, coord)
            runner.start()
            started.append(runner)
        with self._lock:
            # Runners of sessions closed without end() exit on their own.
            self._runners = [r for r in self._runners if r.alive()] + started

    def end(self, session):
        with self._lock:
            mine = [r for r in self._runners if r.session is session]
            self._runners = [r for r in self._runners if r.session is not session]
        for runner in mine:
            runner.stop()


def make_prefetch_hook():
    """Returns the session hook that runs the producers of ``staged`` buffers.

    Add it to every session that takes from a ``staged`` buffer, e.g.
    ``MonitoredTrainingSession(hooks=[make_prefetch_hook()])``.  Without it the
    first take fails at once with an error saying so.

    Returns:
      A ``tf.compat.v1.train.SessionRunHook``.
    """
    return _PrefetchHook()


# --------------------------------------------------------------------------
# Eager / tf.function
# --------------------------------------------------------------------------


def _is_dataset_source(features):
    return isinstance(features, (tf.data.Dataset, tf.data.Iterator))


def _device_dataset(spec):
    """The GPU to prefetch to, when every component can live there.

    ``copy_to_device`` cannot move string or composite components to a GPU,
    so those datasets are prefetched in host memory.
    """
    gpu = _visible_gpu()
    if gpu is None:
        return None
    for leaf in tf.nest.flatten(spec):
        if not isinstance(leaf, tf.TensorSpec) or leaf.dtype in (tf.string, tf.resource, tf.variant):
            logger.info("staged: element has components that cannot live on %s; prefetching in host memory", gpu)
            return None
    return gpu


def _staged_dataset(source, capacity, closed, ignored, name):
    spec = source.element_spec
    stage_name = name or "staged"
    native = (
        isinstance(source, tf.data.Dataset)
        and closed.codes == {tf.errors.OUT_OF_RANGE}
        and not closed.classes
        and not ignored
    )
    if native:
        # tf.data's own semantics already are the default ones: OutOfRange
        # ends the iteration and every other error is raised by next().
        dataset = source
    else:
        dataset = tf.data.Dataset.from_generator(
            lambda: _classified(source, closed, ignored, stage_name), output_signature=spec
        )
    gpu = _device_dataset(spec)
    if gpu is None:
        return iter(dataset.prefetch(capacity))
    # copy_to_device then prefetch placed on the GPU: the copy happens once per
    # element, ahead of the take, and the iterator must live on that device.
    dataset = dataset.apply(tf.data.experimental.copy_to_device(gpu))
    with tf.device(gpu):
        return iter(dataset.prefetch(capacity))


def _classified(source, closed, ignored, stage_name):
    """Elements of ``source`` with closed / ignored errors applied (a generator).

    Runs inside ``from_generator``, i.e. eagerly, so errors can be classified
    by code; only needed when the caller's exception types differ from
    tf.data's own semantics or when ``source`` is an iterator.
    """
    iterator = iter(source) if isinstance(source, tf.data.Dataset) else source
    while True:
        try:
            element = next(iterator)
        except StopIteration:
            if tf.errors.OUT_OF_RANGE in closed.codes:
                return
            raise _bridged_exception(
                tf.errors.UNKNOWN,
                f"staged '{stage_name}': input ended (OutOfRangeError), which is not a closed exception type here",
            ) from None
        except Exception as exc:  # noqa: BLE001 - classified below
            if closed.matches(exc):
                return
            if ignored.matches(exc):
                logger.warning("staged %r: skipped an element: %s", stage_name, _describe(exc))
                continue
            raise _bridged_exception(
                _error_code(exc), f"staged '{stage_name}': input failed with {_describe(exc)}"
            ) from exc
        yield element


# --------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------


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
    closed = _ExceptionTypes(closed_exception_types, "closed_exception_types")
    ignored = _ExceptionTypes(ignored_exception_types, "ignored_exception_types")
    if closed.overlaps(ignored):
        raise ValueError("staged: an exception type cannot be both closed and ignored")
    if stage_subgraph_stream_id:
        logger.warning(
            "staged: stage_subgraph_stream_id=%r ignored: stock TensorFlow runs a GPU's compute on a single stream",
            stage_subgraph_stream_id,
        )

    if _is_dataset_source(features):
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
        return _staged_dataset(features, capacity, closed, ignored, name)

    if tf.executing_eagerly() or tf.inside_function():
        raise TypeError(
            "staged: in eager mode or tf.function, pass a tf.data.Dataset or iterator; "
            "tensors are staged in tf.compat.v1 graph mode"
        )
    pool = stage_subgraph_thread_pool_id if use_stage_subgraph_thread_pool else None
    return _staged_graph(
        features, feed_dict, capacity, num_threads, num_clients, timeout_millis, closed, ignored, pool, name
    )
