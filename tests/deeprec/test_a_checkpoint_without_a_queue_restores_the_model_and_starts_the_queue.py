"""A model checkpoint written before the training had a work queue restores (issue 28).

Users adding Shardline to a running training have such checkpoints. TF1: a
Saver built with worker_sdk.tf.PartialRestoreSaverBuilder (DeepRec's
PartialRestoreSaverBuilder) restores what the checkpoint holds, starts new
variables from their initial values and the queue from its job; the stock
Saver fails on the missing key, as it does in DeepRec's test. TF2's
tf.train.Checkpoint restores such a checkpoint as it is.
"""

import pytest

pytestmark = pytest.mark.tf


def test_tf1_partial_restore_saver_builder_restores_the_model_and_starts_the_queue(graph_worker, tmp_path):
    graph_worker("model-only", "--dir", str(tmp_path))
    stock = graph_worker("partial-restore", "--dir", str(tmp_path), "/a", "/b", check=False)
    assert stock.returncode != 0 and "works_digest not found in checkpoint" in stock.stderr
    partial = graph_worker("partial-restore", "--partial", "--dir", str(tmp_path), "/a", "/b")
    assert partial.items == ["/a"]
    assert "fresh [7.0, 7.0] step 0" in partial.stdout


def test_tf2_checkpoint_without_the_queue_restores_and_the_queue_reads_from_the_start(sdk_env, tmp_path):
    import tensorflow as tf

    from worker_sdk import WorkQueue

    step = tf.Variable(41)
    path = tf.train.Checkpoint(step=step).save(str(tmp_path / "model"))
    queue = WorkQueue(["/a", "/b"], shuffle=False, name="queue_added_later")
    restored = tf.Variable(0)
    tf.train.Checkpoint(step=restored, work_queue=queue).restore(path)
    assert restored.numpy() == 41
    assert [queue.take().numpy() for _ in range(2)] == [b"/a", b"/b"]
