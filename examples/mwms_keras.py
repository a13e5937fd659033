"""Keras ``fit`` under MultiWorkerMirroredStrategy over a WorkQueue: every worker runs each epoch's same steps.

    SHARDLINE_URL=http://localhost:8000 SHARDLINE_TOKEN=... SHARDLINE_RUN=mwms-1 \
        .venv/bin/python examples/mwms_keras.py --workers 2 .shardline/sample/*.csv

Without TF_CONFIG it starts ``--workers`` local worker processes, each with
the TF_CONFIG of a local cluster, and waits for them; with TF_CONFIG (a real
cluster, one process per worker) it is that one worker. Each CSV line is
``a,b,label`` (the sample job's files, from ``make run``).

The files are sliced (``num_slices``): ``distributed.steps_per_epoch`` is an
epoch's records over the global batch, and ``distributed.dataset`` gives
each worker exactly its share of those steps every epoch. Keras 2 (tf_keras,
``TF_USE_LEGACY_KERAS=1``, set below): Keras 3's ``fit`` fails under this
strategy (docs/synchronous.md).

With ``--backup DIR`` (a folder every worker can reach) the model and the
queue's position are saved there at each epoch's end: when a worker dies,
start all of them again with the same command and ``fit`` goes on at the
interrupted epoch with exactly the data not trained on.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # before TensorFlow is imported


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def launch(workers: int) -> int:
    """Runs this script as ``workers`` local workers of one cluster; the first non-zero exit status, or 0."""
    cluster = {"worker": [f"localhost:{free_port()}" for _ in range(workers)]}
    children = []
    for index in range(workers):
        config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = {**os.environ, "TF_CONFIG": json.dumps(config), "TF_CPP_MIN_LOG_LEVEL": "2"}
        children.append(subprocess.Popen([sys.executable, *sys.argv], env=env))
    try:
        while any(child.poll() is None for child in children):
            if any(child.poll() for child in children):
                break  # a worker failed: its peers would wait for it in their next collective
            time.sleep(0.5)
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
                child.wait()
    return next((child.returncode for child in children if child.returncode), 0)


def train(args) -> None:
    import tensorflow as tf

    from worker_sdk import WorkQueue
    from worker_sdk.tf import distributed

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    queue = WorkQueue(args.files, num_epochs=args.epochs, num_slices=args.slices, name="mwms_keras")
    global_batch = args.batch * strategy.num_replicas_in_sync
    steps = distributed.steps_per_epoch(queue, global_batch)

    def parse(lines):
        a, b, label = tf.io.decode_csv(lines, record_defaults=[0.0, 0.0, 0.0])
        return tf.stack([a / 100.0, b / 1000.0], axis=1), label / 10.0

    data = strategy.distribute_datasets_from_function(
        lambda context: distributed.dataset(queue, global_batch, context).map(parse)
    )
    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(1)]
        )
        model.compile(optimizer="adam", loss="mse")
    callbacks = [distributed.BackupAndRestore(queue, args.backup, global_batch)] if args.backup else []
    history = model.fit(data, epochs=args.epochs, steps_per_epoch=steps, verbose=0, callbacks=callbacks)
    task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    if task == 0:
        loss = history.history["loss"]
        first = callbacks[0].first_epoch if callbacks else 0
        print(f"{len(loss)} epochs of {steps} steps on every worker from epoch {first}, final loss {loss[-1]:.4f}")
        marks = queue.watermarks()
        print(f"queue {marks['name']}: {marks['done']}/{marks['total']} items done, state {marks['state']}")
    queue.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2, help="local workers to start when TF_CONFIG is not set")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32, help="records per worker and step")
    parser.add_argument("--slices", type=int, default=48)
    parser.add_argument("--backup", default=None, help="a folder for the model's and the queue's backup")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    if "TF_CONFIG" not in os.environ:
        sys.exit(launch(args.workers))
    train(args)


if __name__ == "__main__":
    main()
