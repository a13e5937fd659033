"""A queue becomes trackable in place as a subclass of its own class, and pickles (or copies) as such."""

import copy
import pickle

import pytest
import tensorflow as tf

from worker_sdk import WorkQueue
from worker_sdk.tf.checkpoint import TrackableQueue, make_trackable

pytestmark = pytest.mark.tf

# Nothing is asked of the server in these tests: nothing needs to listen here.
URL = "http://127.0.0.1:9"


class NamedQueue(WorkQueue):
    def label(self):
        return f"queue {self.name}"


def test_a_queue_built_once_tensorflow_is_loaded_is_trackable():
    queue = WorkQueue(["/a", "/b"], url=URL)
    assert isinstance(queue, TrackableQueue) and isinstance(queue, WorkQueue)
    assert type(queue).__name__ == "TrackableWorkQueue"
    assert type(WorkQueue(["/c"], url=URL)) is type(queue)
    assert tf.train.Checkpoint(work_queue=queue).work_queue is queue


def test_a_subclass_keeps_its_own_methods_when_made_trackable():
    queue = NamedQueue(["/a"], name="mine", url=URL)
    assert isinstance(queue, NamedQueue) and isinstance(queue, TrackableQueue)
    assert queue.label() == "queue mine"
    assert make_trackable(queue) is queue and type(queue).__bases__ == (NamedQueue, TrackableQueue)


def test_a_trackable_queue_pickles_and_copies_as_a_trackable_queue_of_its_class():
    queue = NamedQueue(["/a", "/b"], name="pickled", url=URL)
    # What tf.train.Checkpoint sets on a queue it tracks.
    queue._maybe_initialize_trackable()
    assert any(key.startswith("_self_") for key in vars(queue))
    for twin in (pickle.loads(pickle.dumps(queue)), copy.copy(queue)):
        assert type(twin) is type(queue)
        assert (twin.works, twin.name, twin.label()) == (["/a", "/b"], "pickled", "queue pickled")
        # TensorFlow's tracking state stays with the original.
        assert not any(key.startswith("_self_") for key in vars(twin))
