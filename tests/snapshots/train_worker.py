"""One process of a multi-worker TF2 run: every process restores the chief's checkpoint; the chief saves it.

Prints `read <item>` per item; the chief hangs at `crash-point` after --crash-after items.
"""

import argparse
import sys
import time

import tensorflow as tf

from worker_sdk import WorkQueue


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt-dir", required=True)
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--cost", type=float, default=0.05)
    parser.add_argument("--save-after", type=int, default=0)
    parser.add_argument("--crash-after", type=int, default=0)
    # auto: the queue's default (more ahead of a quick loop).
    parser.add_argument("--look-ahead", type=lambda value: None if value == "auto" else int(value), default=0)
    args = parser.parse_args()

    queue = WorkQueue(
        [f"/items/{i:03d}" for i in range(args.items)], seed=3, name="resume_workers", look_ahead=args.look_ahead
    )
    step = tf.Variable(0, dtype=tf.int64)
    ckpt = tf.train.Checkpoint(step=step, work_queue=queue)
    latest = tf.train.latest_checkpoint(args.ckpt_dir)
    if latest:
        ckpt.restore(latest)
        print("restored", flush=True)
    count = 0
    while True:
        try:
            item = queue.take()
        except tf.errors.OutOfRangeError:
            break
        time.sleep(args.cost)  # the item's work
        step.assign_add(1)
        count += 1
        print("read", item.numpy().decode(), flush=True)
        if count == args.save_after:
            ckpt.save(f"{args.ckpt_dir}/ckpt")
            print("saved", flush=True)
        if count == args.crash_after:
            print("crash-point", flush=True)
            time.sleep(600)  # hangs here until the test kills it: the crash under test
    print("finished", flush=True)


if __name__ == "__main__":
    sys.exit(main())
