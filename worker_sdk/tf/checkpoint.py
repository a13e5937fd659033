"""WorkQueue inside TensorFlow checkpoints (imports TensorFlow).

As DeepRec's WorkQueue, a queue is saved with the model: a checkpoint holds
two strings, the queue's spec digest and its state, which here is a snapshot
of the job taken on the server at save time (``{"job", "snapshot", "seq"}``).
Restoring the checkpoint restores that snapshot on the server: every item
completed after it and every live lease goes back to pending, so the data
read after the checkpoint was written is read again by the restored model,
in the same (epoch, position) order. A checkpoint whose digest differs from
the queue's (other works, epochs, seed...) is ignored with a warning.

- TF2: ``tf.train.Checkpoint(model=model, work_queue=wq)``. The queue is a
  ``Trackable`` (``_serialize_to_tensors`` / ``_restore_from_tensors``):
  ``save()`` takes a snapshot, ``restore()`` restores it (eagerly, at once, or
  when the queue is attached to an already-restored checkpoint). A queue
  becomes trackable in place: its class is swapped for a subclass of its own
  class and ``TrackableQueue`` (``make_trackable``).
- TF1 graphs: a ``SaveableObject`` in the graph's ``SAVEABLE_OBJECTS``
  collection, which ``tf.compat.v1.train.Saver()`` (``var_list=None``) and
  the default Scaffold saver of ``MonitoredTrainingSession`` include. It is
  registered by ``take()``, ``input_dataset()`` and ``input_producer()`` in
  graph mode, or explicitly by ``wq.saveable()``; its save op takes a
  snapshot (``py_func``) every time a checkpoint is written, its restore op
  restores it.

Restores are idempotent on the server, so every worker of a restarted run may
restore the checkpoint, or only the chief. After a restore the queue forgets
the leases it held (the server fenced them).

Only the queue's public API is used (``spec_digest``, ``checkpoint_state``,
``restore_checkpoint_state``, ``name``), and the TensorFlow internals come
from ``worker_sdk.tf.internals``.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

import numpy as np

from ._require import require

tf = require("WorkQueue checkpoints")

from .internals import SaveableObject, SaveSpec, Trackable, called_by_restore  # noqa: E402

if TYPE_CHECKING:
    from ..queue import WorkQueue

DIGEST_KEY = "works_digest"
STATE_KEY = "snapshot"


class TrackableQueue(Trackable):
    """What a queue gains to be saved and restored by ``tf.train.Checkpoint`` (see the module docstring).

    Mixed into a subclass of the queue's own class by ``make_trackable``.
    """

    def _serialize_to_tensors(self):
        with tf.init_scope():
            if called_by_restore():
                state = b""
            else:
                state = self.checkpoint_state()
            return {
                DIGEST_KEY: tf.constant(self.spec_digest().encode(), dtype=tf.string),
                STATE_KEY: tf.constant(state, dtype=tf.string),
            }

    def _restore_from_tensors(self, restored_tensors):
        digest, state = restored_tensors[DIGEST_KEY], restored_tensors[STATE_KEY]
        if tf.executing_eagerly():
            self.restore_checkpoint_state(digest.numpy(), state.numpy())
            return tf.no_op()
        # Inside a tf.function (a restore that TensorFlow runs as a function).
        return tf.py_function(lambda d, s: _restore_flag(self, d.numpy(), s.numpy()), [digest, state], tf.bool).op

    def __reduce__(self):
        # Pickled (a spawned DataLoader worker, a deep copy) as a trackable
        # instance of the same queue class; the class is rebuilt on the other
        # side, since a class made at run time cannot be found by name.
        # TensorFlow's tracking attributes (``_self_*``) stay in this process.
        state = {k: v for k, v in self.__getstate__().items() if not k.startswith("_self_")}
        return _new_trackable, (type(self).__bases__[0],), state


_classes: dict[type, type] = {}
_classes_lock = threading.Lock()


def trackable_class(queue_class: type) -> type:
    """The trackable subclass of ``queue_class`` (one per class, made on first use)."""
    with _classes_lock:
        cls = _classes.get(queue_class)
        if cls is None:
            cls = type(
                f"Trackable{queue_class.__name__}",
                (queue_class, TrackableQueue),
                {"__module__": __name__, "__doc__": f"A {queue_class.__name__} that tf.train.Checkpoint can save."},
            )
            _classes[queue_class] = cls
        return cls


def _new_trackable(queue_class: type):
    cls = trackable_class(queue_class)
    return cls.__new__(cls)


def make_trackable(queue: WorkQueue) -> WorkQueue:
    """Makes the queue trackable in place (its state is unchanged) and returns it."""
    if not isinstance(queue, TrackableQueue):
        queue.__class__ = trackable_class(type(queue))
    return queue


def _restore_flag(queue: WorkQueue, digest: bytes, state: bytes):
    return np.bool_(queue.restore_checkpoint_state(digest, state) is not None)


class WorkQueueSaveable(SaveableObject):
    """A TF1 SaveableObject: (spec digest, snapshot state), as DeepRec's WorkQueue saves (works digest, state)."""

    def __init__(self, queue: WorkQueue, name: str):
        self.queue = queue
        with tf.name_scope(f"{name}_checkpoint"):
            digest = tf.constant(queue.spec_digest().encode(), dtype=tf.string, name="works_digest")
            # Runs whenever the save op runs: one snapshot per checkpoint.
            state = tf.compat.v1.py_func(queue.checkpoint_state, [], tf.string, stateful=True, name="snapshot")
            state.set_shape([])
        specs = [
            SaveSpec(digest, "", f"{name}/{DIGEST_KEY}"),
            SaveSpec(state, "", f"{name}/{STATE_KEY}"),
        ]
        super().__init__(queue, specs, name)

    def restore(self, restored_tensors, restored_shapes):
        digest, state = restored_tensors
        queue = self.queue
        flag = tf.compat.v1.py_func(
            lambda d, s: _restore_flag(queue, d, s), [digest, state], tf.bool, stateful=True, name="restore_snapshot"
        )
        return flag.op


_saveables: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def register_saveable(queue: WorkQueue) -> WorkQueueSaveable:
    """Adds the queue's SaveableObject to the default graph's SAVEABLE_OBJECTS collection (once) and returns it."""
    if tf.executing_eagerly():
        raise RuntimeError("saveable() is for TF1 graphs; in eager code use tf.train.Checkpoint(work_queue=wq)")
    graph = tf.compat.v1.get_default_graph()
    # The saveable holds its queue, so the id cannot be reused while it is here.
    per_graph = _saveables.setdefault(graph, {})
    saveable = per_graph.get(id(queue))
    if saveable is None:
        saveable = WorkQueueSaveable(queue, queue.name)
        per_graph[id(queue)] = saveable
        graph.add_to_collection(tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS, saveable)
    return saveable
