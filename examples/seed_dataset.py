"""DeepRec's tf.data WorkQueue example, with only the import line changed.

    SHARDLINE_URL=http://localhost:8000 SHARDLINE_TOKEN=... \
        .venv/bin/python examples/seed_dataset.py FILE [FILE ...]

Prints every line the worker read, then the count.
"""

import sys

import tensorflow as tf

from worker_sdk import WorkQueue

files = sys.argv[1:] or sys.exit("usage: seed_dataset.py FILE [FILE ...]")
filename, filename1, filename2, filename3 = (files * 4)[:4]  # the seed names four files
num_epochs = 1
batch_size = 4

# --- the seed's code, unchanged below this line ---
# use WorkQueue to allocate tasks
work_queue = WorkQueue([filename, filename1, filename2, filename3])
f_data = work_queue.input_dataset()
# Extract lines from input files using the Dataset API.
dataset = tf.data.TextLineDataset(f_data)
dataset = dataset.shuffle(buffer_size=20000, seed=2021)  # fix seed for reproducing
dataset = dataset.repeat(num_epochs)
dataset = dataset.prefetch(batch_size)
dataset = dataset.batch(batch_size)
dataset = dataset.prefetch(1)
# --- end of the seed's code ---

count = 0
for batch in dataset:
    for line in batch.numpy():
        print(line.decode())
        count += 1
print(f"read {count} lines", file=sys.stderr)
