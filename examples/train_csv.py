"""Train a small model on CSV files leased from Shardline (TF2, Keras).

    SHARDLINE_URL=http://localhost:8000 SHARDLINE_TOKEN=... \
        .venv/bin/python examples/train_csv.py .shardline/sample/*.csv

Each CSV line is `a,b,label` (the sample job's files, from `make run`). The
model learns label from (a, b); every file is leased, read and completed
once per epoch, by however many copies of this script run at once.
"""

import sys

import tensorflow as tf

from worker_sdk import WorkQueue

files = sys.argv[1:]
if not files:
    sys.exit("usage: train_csv.py FILE [FILE ...]")

queue = WorkQueue(files, num_epochs=2, name="train_csv")


def parse(line):
    a, b, label = tf.io.decode_csv(line, record_defaults=[0.0, 0.0, 0.0])
    return tf.stack([a / 100.0, b / 1000.0]), label / 10.0


dataset = tf.data.TextLineDataset(queue.input_dataset()).map(parse).batch(64)
model = tf.keras.Sequential(
    [tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss="mse")
history = model.fit(dataset, verbose=0)
marks = queue.watermarks()
print(f"final loss {history.history['loss'][-1]:.4f}")
print(f"queue {marks['name']}: {marks['done']}/{marks['total']} items done, state {marks['state']}")
