"""Graph mode: building a staged buffer, and the per-graph record of stages the prefetch hook runs.

``staged_graph`` builds the buffer, its put / take / close ops and the take's
error check (see the package docstring for why they are built this way) and
records a ``Stage``: what ``worker_sdk.tf.staging.runner`` needs to run its
producers in a session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import weakref

import tensorflow as tf

from ..internals import GPUCompatibleFIFOQueue
from .errors import ExceptionTypes, raise_producer_error

_OK = 0


@dataclasses.dataclass(frozen=True)
class Stage:
    """What the hook needs to run one ``staged`` call, by tensor and op name."""

    name: str
    capacity: int
    num_threads: int
    num_clients: int
    timeout_millis: int
    closed: ExceptionTypes
    ignored: ExceptionTypes
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


def stages_of(graph):
    with _stages_lock:
        return list(_stages_by_graph.get(graph, ()))


def claim(session, stage_name):
    with _stages_lock:
        running = _running_by_session.setdefault(session, set())
        if stage_name in running:
            return False
        running.add(stage_name)
        return True


def visible_gpu():
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
    return visible_gpu()


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


def staged_graph(
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
            buffer = GPUCompatibleFIFOQueue(capacity, dtypes, name="buffer")
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
                lambda: tf.py_function(raise_producer_error, [code, message], tf.bool),
                name="check",
            )
        outputs = []
        with tf.control_dependencies([checked]):
            for source, component in zip(tensors, components):
                with placement(source.dtype):
                    output = tf.identity(component)
                output.set_shape(source.shape)
                outputs.append(output)

    stage = Stage(
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
