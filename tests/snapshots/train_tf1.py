"""A TF1 graph trained under MonitoredTrainingSession over a WorkQueue; its saver hook checkpoints the queue.

Prints `read <item>` per step; hangs at `crash-point` after --crash-after steps (the test SIGKILLs it).
"""

import argparse
import sys
import time

import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

from worker_sdk import WorkQueue  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt-dir", required=True)
    parser.add_argument("--save-steps", type=int, default=3)
    parser.add_argument("--crash-after", type=int, default=0)
    parser.add_argument("works", nargs="+")
    args = parser.parse_args()

    # One item ahead whatever the loop's pace, so that the test can count the
    # leases a crash leaves (the default keeps more ahead of a quick loop).
    queue = WorkQueue(args.works, num_epochs=2, seed=9, name="resume_tf1", look_ahead=1)
    item = queue.take()  # registers the queue's SaveableObject in this graph
    global_step = tf.train.get_or_create_global_step()
    total = tf.Variable(0, dtype=tf.int64, name="bytes_read")
    with tf.control_dependencies([total.assign_add(tf.cast(tf.strings.length(tf.io.read_file(item)), tf.int64))]):
        train = tf.group(global_step.assign_add(1), name="train")

    steps = 0
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=args.ckpt_dir,
        save_checkpoint_steps=args.save_steps,
        save_summaries_steps=None,
        log_step_count_steps=None,
    ) as sess:
        while not sess.should_stop():
            try:
                path, _ = sess.run([item, train])
            except tf.errors.OutOfRangeError:
                break
            steps += 1
            print("read", path.decode(), flush=True)
            if steps == args.crash_after:
                print("crash-point", flush=True)
                time.sleep(600)  # hangs here until the test kills it: the crash under test
    print("finished", flush=True)


if __name__ == "__main__":
    sys.exit(main())
