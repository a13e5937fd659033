"""DeepRec's TextLineReader + MonitoredTrainingSession example (TF1 graph), with only the import line changed.

    SHARDLINE_URL=http://localhost:8000 SHARDLINE_TOKEN=... \
        .venv/bin/python examples/seed_reader.py FILE [FILE ...]

Prints every line the worker read.
"""

import sys

import tensorflow.compat.v1 as tf

from worker_sdk import WorkQueue

tf.disable_eager_execution()
files = sys.argv[1:] or sys.exit("usage: seed_reader.py FILE [FILE ...]")
path1, path2, path3 = (files * 3)[:3]  # the seed names three files

# --- the seed's code, unchanged below this line ---
work_queue = WorkQueue([path1, path2, path3], shuffle=True)
work_queue.add_summary()
# 创建文件读取器
reader = tf.TextLineReader()
# 从文件列表中读取 2 条记录
keys, values = reader.read_up_to(work_queue.input_producer(), num_records=2)
with tf.train.MonitoredTrainingSession() as sess:
    # --- end of the seed's code; the seed's `sess.run(...)` becomes a read loop ---
    while not sess.should_stop():
        for line in sess.run(values):
            print(line.decode())
