"""The TensorFlow internals named in worker_sdk/tf/internals.py exist in the installed TensorFlow and behave as relied on.

Stock TensorFlow has no public API for them, so each supported version is
checked here: an upgrade that moves or changes one fails this file, not a
training run. The queue is a stand-in with the public API
worker_sdk.tf.checkpoint uses, so no server is involved.
"""

import importlib
import inspect

import pytest
import tensorflow as tf

from worker_sdk.tf import checkpoint, internals

pytestmark = pytest.mark.tf


class StandInQueue:
    """The part of WorkQueue's public API that checkpoints use, counting the calls."""

    name = "stand_in"

    def __init__(self):
        self.digests = 0
        self.snapshots = 0
        self.restored = []

    def spec_digest(self):
        self.digests += 1
        return "digest"

    def checkpoint_state(self):
        self.snapshots += 1
        return f"state-{self.snapshots}".encode()

    def restore_checkpoint_state(self, digest, state):
        self.restored.append((digest, state))
        return {"reopened": 0}


def test_the_restore_module_exists_and_the_gpu_queue_is_a_queue():
    # The other internals are imported by name when internals.py loads: a
    # moved one fails this file's collection.
    assert importlib.import_module(internals.RESTORE_MODULE).__name__ == internals.RESTORE_MODULE
    # staging uses the QueueBase ops: enqueue, dequeue, close, size.
    assert issubclass(internals.GPUCompatibleFIFOQueue, tf.queue.QueueBase)
    # PartialRestoreSaverBuilder overrides bulk_restore, which _AddRestoreOps calls with these arguments.
    parameters = list(inspect.signature(internals.BulkSaverBuilder.bulk_restore).parameters)
    assert parameters == ["self", "filename_tensor", "saveables", "preferred_shard", "restore_sequentially"]
    assert "self.bulk_restore(" in inspect.getsource(internals.BulkSaverBuilder._AddRestoreOps)


def test_a_checkpoint_save_takes_one_snapshot_and_its_restore_takes_none(tmp_path):
    # Restoring calls _serialize_to_tensors too (for the tensors' names):
    # called_by_restore must see the restore module above it then, and only then.
    saved = checkpoint.make_trackable(StandInQueue())
    assert isinstance(saved, internals.Trackable)
    path = tf.train.Checkpoint(work_queue=saved).save(str(tmp_path / "ckpt"))
    assert (saved.digests, saved.snapshots) == (1, 1)

    restored = checkpoint.make_trackable(StandInQueue())
    tf.train.Checkpoint(work_queue=restored).restore(path).assert_consumed()
    assert restored.digests >= 1, "the restore no longer asks the queue for its tensors"
    assert restored.snapshots == 0
    assert restored.restored == [(b"digest", b"state-1")]


def test_called_by_restore_is_false_outside_a_restore():
    def serialize_to_tensors():
        return internals.called_by_restore()

    assert serialize_to_tensors() is False


def test_a_tf1_saver_saves_and_restores_the_queue_through_its_saveable_object(tmp_path):
    queue = StandInQueue()
    with tf.Graph().as_default() as graph:
        saveable = checkpoint.register_saveable(queue)
        assert isinstance(saveable, internals.SaveableObject)
        assert graph.get_collection(tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS) == [saveable]
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            path = saver.save(session, str(tmp_path / "model"))
            assert queue.snapshots == 1
            saver.restore(session, path)
    assert queue.snapshots == 1
    assert queue.restored == [(b"digest", b"state-1")]


def test_the_gpu_compatible_fifo_queue_is_placed_by_the_device_scope_unlike_the_public_one():
    # Building a graph places nothing, so no GPU is needed to see the request.
    with tf.Graph().as_default():
        with tf.device("/device:GPU:0"):
            movable = internals.GPUCompatibleFIFOQueue(1, [tf.int32])
            pinned = tf.queue.FIFOQueue(1, [tf.int32])
    assert movable.queue_ref.device == "/device:GPU:0"
    assert pinned.queue_ref.device == "/device:CPU:0"


def test_a_session_says_when_it_is_closed():
    session = tf.compat.v1.Session(graph=tf.Graph())
    assert internals.session_closed(session) is False
    session.close()
    assert internals.session_closed(session) is True
