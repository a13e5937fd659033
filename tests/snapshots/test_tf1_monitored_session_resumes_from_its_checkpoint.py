"""A TF1 MonitoredTrainingSession killed mid-epoch resumes from checkpoint_dir in a new process;
and an explicit Saver saves and restores a queue in a graph."""

import pytest

from server.models import Item, ItemHistory, Snapshot, SnapshotRestore

from .crash import reads, run_to_end, run_until, start

pytestmark = pytest.mark.tf

SCRIPT = "tests/snapshots/train_tf1.py"


def test_a_killed_monitored_session_reads_again_what_followed_its_last_checkpoint(sdk_env, csv_files, tmp_path):
    ckpt_dir = str(tmp_path / "ckpt")
    # The saver hook saves at step 3 (item 3 still in hand); the crash holds item 5.
    first = reads(
        run_until(start([SCRIPT, "--ckpt-dir", ckpt_dir, "--crash-after", "5", *csv_files], sdk_env), "crash-point")
    )
    assert len(first) == 5

    second_lines = run_to_end(start([SCRIPT, "--ckpt-dir", ckpt_dir, *csv_files], sdk_env))
    second = reads(second_lines)
    assert second[:3] == first[2:5] and len(second) == 8 - 2 and "finished" in second_lines

    job_name = f"resume_tf1.{sdk_env['SHARDLINE_RUN']}"
    items = Item.objects.filter(job__name=job_name)
    assert items.count() == 8 and set(items.values_list("state", flat=True)) == {"done"}
    (restore,) = SnapshotRestore.objects.filter(job__name=job_name)
    # After the snapshot: the item in hand at the save, the next (finished),
    # the item in hand at the crash, and the one leased ahead of it
    # (WorkQueue's look_ahead) if that take reached the server before the
    # kill. Each finished one is re-opened, unless the kill stopped the take
    # ahead that carried its completion: then it is fenced, as is the item
    # in hand. The first one's completion came with the take that leased the
    # item in hand at the crash, so it is always re-opened.
    assert 1 <= restore.reopened <= 2 and restore.reopened + restore.fenced in (3, 4)
    assert ItemHistory.objects.filter(job__name=job_name).count() == restore.reopened + restore.fenced
    # The hook checkpoints at session start, at step 3, at start after the restore and at the end.
    assert Snapshot.objects.filter(job__name=job_name).count() >= 3


def test_an_explicit_saver_saves_and_restores_the_queue_in_a_graph(sdk_env, tmp_path):
    import tensorflow as tf

    from worker_sdk import WorkQueue
    from worker_sdk.tf.checkpoint import WorkQueueSaveable

    queue = WorkQueue([f"/g/{i}" for i in range(5)], shuffle=False, name="graph_saver")
    with tf.Graph().as_default() as graph:
        item = queue.take()
        step = tf.compat.v1.train.get_or_create_global_step()
        saveables = graph.get_collection(tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS)
        assert [type(s) for s in saveables] == [WorkQueueSaveable] and queue.saveable() is saveables[0]
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as sess:
            sess.run(step.initializer)
            assert [sess.run(item) for _ in range(2)] == [b"/g/0", b"/g/1"]
            path = saver.save(sess, str(tmp_path / "model"))
            assert [sess.run(item) for _ in range(2)] == [b"/g/2", b"/g/3"]
            saver.restore(sess, path)
            assert [sess.run(item) for _ in range(4)] == [b"/g/1", b"/g/2", b"/g/3", b"/g/4"]
