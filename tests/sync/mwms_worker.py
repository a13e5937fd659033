"""One worker of a MultiWorkerMirroredStrategy run over a WorkQueue with Keras fit (tests/sync; TF_CONFIG names it).

    python tests/sync/mwms_worker.py --name NAME --slices S --epochs E --batch GLOBAL --out FILE
        [--backup DIR] [--die-at EPOCH:STEP] [--slow SECONDS] WORK...

The dataset is worker_sdk.tf.distributed's: each worker reads its share of
every epoch's steps. A reader logs each record as it is read (``read
RECORD`` in FILE): in that mode everything read is trained on. Keras prints
"ran out of data" if a worker's input ended early; the test looks for it.
With --backup, distributed.BackupAndRestore keeps the model and the queue in
DIR, and FILE starts with ``first EPOCH``, the epoch the input starts at;
--die-at makes the worker SIGKILL itself at that step; --slow makes each
record cost that long to read.
"""

import argparse
import faulthandler
import os
import signal
import time

import tensorflow as tf

from worker_sdk import WorkQueue, readers
from worker_sdk.tf import distributed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--slices", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16, help="the global batch")
    parser.add_argument("--out", required=True)
    parser.add_argument("--backup", default=None)
    parser.add_argument("--die-at", default=None, help="EPOCH:STEP")
    parser.add_argument("--slow", type=float, default=0.0)
    parser.add_argument("works", nargs="+")
    args = parser.parse_args()
    faulthandler.register(signal.SIGUSR1, all_threads=True)

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    queue = WorkQueue(args.works, num_epochs=args.epochs, shuffle=False, num_slices=args.slices, name=args.name)
    steps = distributed.steps_per_epoch(queue, args.batch)
    log = open(args.out, "w", buffering=1)  # line by line: a worker may be killed

    def reader(item):
        for record in readers.records(item):
            if args.slow:
                time.sleep(args.slow)  # the slow worker's reading: the straggler under test
            log.write(f"read {record.decode()}\n")
            yield record

    def features(batch):
        x = tf.cast(tf.strings.length(batch), tf.float32)[:, None]
        return x, tf.zeros_like(x)

    data = strategy.distribute_datasets_from_function(
        lambda context: distributed.dataset(queue, args.batch, context, reader=reader).map(features)
    )
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Input(shape=(1,)), tf.keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
    callbacks = []
    if args.backup:
        backup = distributed.BackupAndRestore(queue, args.backup, args.batch)

        class First(tf.keras.callbacks.Callback):
            def on_train_begin(self, logs=None):
                log.write(f"first {backup.first_epoch}\n")
                log.flush()

        callbacks += [backup, First()]
    if args.die_at:
        die = tuple(int(part) for part in args.die_at.split(":"))

        class Die(tf.keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                self.epoch = epoch

            def on_train_batch_begin(self, batch, logs=None):
                if (self.epoch, batch) == die:
                    log.flush()
                    os.kill(os.getpid(), signal.SIGKILL)

        callbacks.append(Die())
    history = model.fit(data, epochs=args.epochs, steps_per_epoch=steps, verbose=2, callbacks=callbacks)
    log.write(f"epochs {len(history.history['loss'])} steps {steps}\n")
    log.close()
    queue.close()


if __name__ == "__main__":
    main()
