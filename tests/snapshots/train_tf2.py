"""A Keras model trained over CSV files read through a WorkQueue, checkpointed with tf.train.Checkpoint.

Prints `read <item>` for each item it trains on, `saved` after a checkpoint,
and stops at `crash-point` (the test SIGKILLs it there) unless --crash-after is 0.
"""

import argparse
import sys
import time

import tensorflow as tf

from worker_sdk import WorkQueue


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt-dir", required=True)
    parser.add_argument("--save-after", type=int, default=0, help="checkpoint after this many items (0: never)")
    parser.add_argument("--crash-after", type=int, default=0, help="hang at this many items, to be killed (0: never)")
    parser.add_argument("works", nargs="+")
    args = parser.parse_args()

    # One item ahead whatever the loop's pace, so that the test can count the
    # leases a crash leaves (the default keeps more ahead of a quick loop).
    queue = WorkQueue(args.works, num_epochs=2, seed=5, name="resume_tf2", look_ahead=1)
    model = tf.keras.Sequential([tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(3)])
    optimizer = tf.keras.optimizers.SGD(0.01)
    ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, work_queue=queue)
    manager = tf.train.CheckpointManager(ckpt, args.ckpt_dir, max_to_keep=2)
    if manager.latest_checkpoint:
        ckpt.restore(manager.latest_checkpoint)
        print("restored", flush=True)

    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    count = 0
    while True:
        try:
            item = queue.take()
        except tf.errors.OutOfRangeError:
            break
        lines = tf.data.TextLineDataset(item).map(lambda line: tf.io.decode_csv(line, [0.0, 0.0, 0]))
        for x0, x1, label in lines.batch(16):
            with tf.GradientTape() as tape:
                loss = loss_fn(label, model(tf.stack([x0, x1], axis=1)))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        count += 1
        print("read", item.numpy().decode(), flush=True)
        if count == args.save_after:
            manager.save()
            print("saved", flush=True)
        if count == args.crash_after:
            print("crash-point", flush=True)
            time.sleep(600)  # hangs here until the test kills it: the crash under test
    print("finished", flush=True)


if __name__ == "__main__":
    sys.exit(main())
