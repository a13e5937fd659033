"""TF1 graph programs in DeepRec's shapes (graph mode, MonitoredTrainingSession), one per subcommand.

Each runs in a fresh interpreter (graph mode is per process) against
SHARDLINE_URL / SHARDLINE_TOKEN / SHARDLINE_RUN, prints what it read as
``read <item>`` lines and ends with ``finished`` (or dies where told).
"""

import argparse
import os
import sys

import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

from worker_sdk import LocalWorkMgr, WorkQueue  # noqa: E402
from worker_sdk.tf import PartialRestoreSaverBuilder  # noqa: E402


def local_work(args):
    """Reads with a LocalWorkMgr through input_dataset(); --die-after N: exits abruptly after N items."""
    manager = LocalWorkMgr("worker", args.task, args.dir)
    queue = WorkQueue(
        args.works, shuffle=False, name=args.name, local_work_mgr=manager, lease_timeout=60, prefix=args.prefix
    )
    iterator = tf.data.make_initializable_iterator(queue.input_dataset())
    tf.add_to_collection(tf.GraphKeys.TABLE_INITIALIZERS, iterator.initializer)
    item = iterator.get_next()
    read = 0
    with tf.train.MonitoredTrainingSession(hooks=[manager.hook()], log_step_count_steps=None) as sess:
        while True:
            try:
                print("read", sess.run(item).decode(), flush=True)
            except tf.errors.OutOfRangeError:
                break
            read += 1
            if read == args.die_after:
                print("dying", flush=True)
                os._exit(0)  # no at-exit acknowledgement: its leases stay held, as a killed worker's would


def checkpoint(args):
    """DeepRec's test_monitored_session_restore shape: one step under a checkpointing session."""
    tf.train.get_or_create_global_step()
    queue = WorkQueue(args.works, num_epochs=3, shuffle=False, name=args.name)
    dequeue = queue.input_producer().dequeue()
    with tf.train.MonitoredTrainingSession(checkpoint_dir=args.dir, log_step_count_steps=None) as sess:
        print("read", sess.run(dequeue)[0].decode(), flush=True)


def model_only(args):
    """Writes a checkpoint of a model that has no work queue yet."""
    tf.train.get_or_create_global_step()
    tf.get_variable("mock", initializer=tf.zeros([10]))
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, os.path.join(args.dir, "model_only"))


def partial_restore(args):
    """Restores the model-only checkpoint into a graph that now has a queue (and no 'mock')."""
    step = tf.train.get_or_create_global_step()
    queue = WorkQueue(args.works, num_epochs=1, shuffle=False, name=args.name)
    dequeue = queue.input_producer().dequeue()
    fresh = tf.get_variable("fresh", initializer=tf.fill([2], 7.0))
    if args.partial:
        saver = tf.train.Saver(builder=PartialRestoreSaverBuilder(checkpoint_dir=args.dir))
        tf.add_to_collection(tf.GraphKeys.SAVERS, saver)
    with tf.train.MonitoredTrainingSession(checkpoint_dir=args.dir, log_step_count_steps=None) as sess:
        print("read", sess.run(dequeue)[0].decode(), flush=True)
        print("fresh", sess.run(fresh).tolist(), "step", sess.run(step), flush=True)


def runner_error(args):
    """input_producer() whose takes fail: the training loop's dequeue raises, with or without a Coordinator."""
    queue = WorkQueue(args.works, shuffle=False, name=args.name)
    proxy = queue.input_producer()
    dequeue_many = proxy.dequeue_many(2)
    if args.monitored:
        with tf.train.MonitoredSession() as sess:
            sess.run(dequeue_many)
        return
    with tf.Session() as sess:
        threads = tf.train.start_queue_runners(sess)
        try:
            sess.run(dequeue_many)
        except tf.errors.OpError as exc:
            print("raised", type(exc).__name__, " ".join(exc.message.split()), flush=True)
        for thread in threads:
            thread.join(30)
            assert not thread.is_alive(), "a queue runner thread is still running"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command")
    parser.add_argument("--dir", default="")
    parser.add_argument("--name", default="deeprec_queue")
    parser.add_argument("--task", type=int, default=0)
    parser.add_argument("--die-after", type=int, default=0)
    parser.add_argument("--prefix", default=None)
    parser.add_argument("--partial", action="store_true")
    parser.add_argument("--monitored", action="store_true")
    parser.add_argument("works", nargs="*")
    args = parser.parse_intermixed_args()
    {
        "local-work": local_work,
        "checkpoint": checkpoint,
        "model-only": model_only,
        "partial-restore": partial_restore,
        "runner-error": runner_error,
    }[args.command](args)
    print("finished", flush=True)


if __name__ == "__main__":
    sys.exit(main())
