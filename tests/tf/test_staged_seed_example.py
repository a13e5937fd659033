"""DeepRec's seed example for tf.staged runs with only its imports changed."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf

REPO_ROOT = Path(__file__).resolve().parents[2]

# The seed document's example; only the imports differ (and the call sites of
# the two imported names), and tf.train.mark_target_node is left out.
SEED_EXAMPLE = """
import tensorflow as tf
from worker_sdk import make_prefetch_hook, staged
tf = tf.compat.v1
tf.disable_eager_execution()

filename_queue = tf.train.string_input_producer(['1.txt'])
reader = tf.TextLineReader()
k, v = reader.read(filename_queue)
var = tf.get_variable("var", shape=[100, 3], initializer=tf.ones_initializer())
v = tf.train.batch([v], batch_size=2, capacity=20 * 3)
v0, v1 = tf.decode_csv(v, record_defaults=[[''], ['']], field_delim=',')
xx = staged([v0, v1])
xx[0]=tf.string_to_hash_bucket(xx[0],num_buckets=10)
xx[0] = tf.nn.embedding_lookup(var, xx[0])
xx[1]=tf.concat([xx[1], ['xxx']], axis = 0)
target = tf.concat([tf.as_string(xx[0]), [xx[1], xx[1]]], 0)
with tf.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
  for i in range(5):
      print(sess.run([target]))
"""


def test_seed_example_prints_five_staged_batches_in_file_order(tmp_path):
    (tmp_path / "1.txt").write_text("k0,v0\nk1,v1\nk2,v2\nk3,v3\n")
    (tmp_path / "seed.py").write_text(SEED_EXAMPLE)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")

    proc = subprocess.run(
        [sys.executable, "seed.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )

    assert proc.returncode == 0, proc.stderr[-4000:]
    cells = re.findall(r"b'([^']*)'", proc.stdout)
    assert len(cells) == 5 * 12, proc.stdout
    batches = [cells[i : i + 12] for i in range(0, len(cells), 12)]
    for index, batch in enumerate(batches):
        # Rows 0-1: embeddings of the hashed first column (all-ones table).
        assert batch[:6] == ["1.000000"] * 6
        # Rows 2-3: the second column of two consecutive lines, then 'xxx'.
        first = (2 * index) % 4
        expected_row = [f"v{first}", f"v{first + 1}", "xxx"]
        assert batch[6:9] == expected_row
        assert batch[9:12] == expected_row
