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
  when the queue is attached to an already-restored checkpoint).
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
"""

from __future__ import annotations

import sys
import weakref

import numpy as np

from ._tf_import import require
from .queue import WorkQueue

tf = require("WorkQueue checkpoints")

from tensorflow.python.trackable import base as _trackable  # noqa: E402
from tensorflow.python.training.saving import saveable_object as _saveable  # noqa: E402

DIGEST_KEY = "works_digest"
STATE_KEY = "snapshot"


def _called_by_restore() -> bool:
    """True while TensorFlow's restore asks which tensors a trackable has.

    Restoring calls ``_serialize_to_tensors`` only to learn the names and
    types of the saved tensors; taking a snapshot on the server then would be
    a wasted request (and a misleading snapshot row).
    """
    frame = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            return False
        if frame.f_globals.get("__name__", "").startswith("tensorflow.python.checkpoint.restore"):
            return True
        frame = frame.f_back
    return False


class TrackableWorkQueue(WorkQueue, _trackable.Trackable):
    """A WorkQueue that ``tf.train.Checkpoint`` can save and restore (see the module docstring)."""

    def _serialize_to_tensors(self):
        with tf.init_scope():
            if _called_by_restore():
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


def _restore_flag(queue: WorkQueue, digest: bytes, state: bytes):
    return np.bool_(queue.restore_checkpoint_state(digest, state) is not None)


def make_trackable(queue: WorkQueue) -> WorkQueue:
    """Turns a WorkQueue into a TrackableWorkQueue in place (its state is unchanged) and returns it."""
    if not isinstance(queue, TrackableWorkQueue):
        queue.__class__ = TrackableWorkQueue
    return queue


class WorkQueueSaveable(_saveable.SaveableObject):
    """A TF1 SaveableObject: (spec digest, snapshot state), as DeepRec's WorkQueue saves (works digest, state)."""

    def __init__(self, queue: WorkQueue, name: str):
        self.queue = queue
        with tf.name_scope(f"{name}_checkpoint"):
            digest = tf.constant(queue.spec_digest().encode(), dtype=tf.string, name="works_digest")
            # Runs whenever the save op runs: one snapshot per checkpoint.
            state = tf.compat.v1.py_func(queue.checkpoint_state, [], tf.string, stateful=True, name="snapshot")
            state.set_shape([])
        specs = [
            _saveable.SaveSpec(digest, "", f"{name}/{DIGEST_KEY}"),
            _saveable.SaveSpec(state, "", f"{name}/{STATE_KEY}"),
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


def register_saveable(queue: WorkQueue, graph=None) -> WorkQueueSaveable:
    """Adds the queue's SaveableObject to ``graph``'s SAVEABLE_OBJECTS collection (once) and returns it."""
    if tf.executing_eagerly():
        raise RuntimeError("saveable() is for TF1 graphs; in eager code use tf.train.Checkpoint(work_queue=wq)")
    graph = graph or tf.compat.v1.get_default_graph()
    per_graph = _saveables.setdefault(graph, {})
    saveable = per_graph.get(id(queue))
    if saveable is None or saveable.queue is not queue:
        with graph.as_default():
            saveable = WorkQueueSaveable(queue, queue.name)
        per_graph[id(queue)] = saveable
        graph.add_to_collection(tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS, saveable)
    return saveable
