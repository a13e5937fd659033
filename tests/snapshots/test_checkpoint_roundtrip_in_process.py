"""tf.train.Checkpoint saves a WorkQueue's position and restores it, in one process."""

import warnings

import pytest

from server.models import Snapshot

pytestmark = pytest.mark.tf


def test_a_tf2_checkpoint_restores_the_queue_to_where_it_was_saved(sdk_env, tmp_path):
    import tensorflow as tf

    from worker_sdk import WorkQueue

    queue = WorkQueue([f"/w/{i}" for i in range(6)], shuffle=False, name="ckpt_roundtrip")
    step = tf.Variable(0)
    ckpt = tf.train.Checkpoint(step=step, work_queue=queue)
    read = [queue.take().numpy() for _ in range(2)]
    path = ckpt.save(str(tmp_path / "ckpt"))
    read += [queue.take().numpy() for _ in range(3)]
    assert read == [f"/w/{i}".encode() for i in range(5)]

    ckpt.restore(path).assert_consumed()
    # /w/1 was in hand at save time, /w/2-/w/3 completed after it, /w/4 held: all read again, once.
    again = []
    while True:
        try:
            again.append(queue.take().numpy())
        except tf.errors.OutOfRangeError:
            break
    # In order: what a take ahead on its way across the restore brought is
    # given back before anything is taken past it (worker_sdk.look_ahead).
    assert again == [f"/w/{i}".encode() for i in range(1, 6)]
    marks = queue.watermarks()
    assert (marks["done"], marks["pending"], marks["leased"]) == (6, 0, 0)
    # Restoring asked the server for no snapshot of its own.
    assert Snapshot.objects.filter(job_id=queue.job["id"]).count() == 1


def test_a_checkpoint_of_another_queue_spec_is_ignored_with_a_warning(sdk_env, tmp_path):
    import tensorflow as tf

    from worker_sdk import WorkQueue

    saved = WorkQueue(["/a", "/b", "/c"], shuffle=False, name="ckpt_spec_a")
    saved.take()
    path = tf.train.Checkpoint(work_queue=saved).save(str(tmp_path / "ckpt"))
    # A run of its own: another job, fresh whatever ran before (--count repeats this test).
    other = WorkQueue(["/a", "/b", "/x"], shuffle=False, name="ckpt_spec_a", run=f"other-{sdk_env['SHARDLINE_RUN']}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tf.train.Checkpoint(work_queue=other).restore(path)
    assert any("other works or settings" in str(w.message) for w in caught)
    assert other.take().numpy() == b"/a"
