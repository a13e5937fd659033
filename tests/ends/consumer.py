"""One worker process of the end-of-job tests: reads queues in one consumer shape, round after round.

Every round is a new job over the same small files (the queue's run is
``<run>-r<round>``); all processes of a test start each round together (a
file barrier), so they reach the end of the job at the same moment, which is
what these tests are about. Each record read is printed as
``read <round> <record>``; each round ends with ``end <round> <how>``.
"""

import argparse
import faulthandler
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

from tests.support import arrive_and_wait
from worker_sdk import QueueExhausted, WorkQueue

SHAPES = (
    "items",
    "lease",
    "take_eager",
    "take_graph",
    "input_dataset",
    "input_producer",
    "dataset",
    "torch",
    "two_queues",
    "two_threads",
)


_out_lock = threading.Lock()


def out(*words):
    line = " ".join(str(word) for word in words) + "\n"
    with _out_lock:  # whole lines, whatever the threads
        sys.stdout.write(line)
        sys.stdout.flush()


def pause(cost):
    time.sleep(random.uniform(0, cost))  # the loop's work on an item, of random length


def read_lines(path):
    """The reader of the torch and dataset shapes (module level: loader processes pickle it)."""
    with open(path, "rb") as handle:
        for line in handle:
            yield line.rstrip(b"\n")


def queue_for(args, round_no, name=None):
    return WorkQueue(
        args.works,
        shuffle=True,
        seed=round_no,
        name=name or args.name,
        run=f"{args.run}-r{round_no}",
        lease_timeout=args.lease_timeout,
    )


def records_of(path):
    return [line.decode() for line in read_lines(path)]


# -- one function per shape: each reads one round and prints what it read -----------


def items(args, r):
    for item in queue_for(args, r).items():
        pause(args.cost)
        for record in records_of(item):
            out("read", r, record)
    return "exhausted"


def lease(args, r):
    queue = queue_for(args, r)
    while True:
        try:
            with queue.lease() as item:
                pause(args.cost)
                for record in records_of(item):
                    out("read", r, record)
        except QueueExhausted:
            return "exhausted"


def take_eager(args, r):
    import tensorflow as tf

    queue = queue_for(args, r)
    while True:
        try:
            item = queue.take().numpy().decode()
        except tf.errors.OutOfRangeError as exc:
            return "out_of_range" if "are taken" in exc.message else f"unexpected {exc.message}"
        pause(args.cost)
        for record in records_of(item):
            out("read", r, record)


def take_graph(args, r):
    import tensorflow.compat.v1 as tf

    with tf.Graph().as_default():
        work = queue_for(args, r).take()
        with tf.Session() as session:
            while True:
                try:
                    item = session.run(work).decode()
                except tf.errors.OutOfRangeError:
                    return "out_of_range"
                pause(args.cost)
                for record in records_of(item):
                    out("read", r, record)


def input_dataset(args, r):
    import tensorflow as tf

    dataset = tf.data.TextLineDataset(queue_for(args, r).input_dataset())
    for record in dataset:
        pause(args.cost / 4)
        out("read", r, record.numpy().decode())
    return "exhausted"


def input_producer(args, r):
    import tensorflow.compat.v1 as tf

    with tf.Graph().as_default():
        queue = queue_for(args, r)
        _keys, values = tf.TextLineReader().read_up_to(queue.input_producer(), num_records=3)
        with tf.train.MonitoredSession() as session:
            while not session.should_stop():
                for record in session.run(values):
                    out("read", r, record.decode())
                pause(args.cost / 4)
        # What the reader still held is acknowledged now that it has finished.
        queue.close()
    return "exhausted"


def dataset(args, r):
    for record in queue_for(args, r).dataset(reader=lambda item, _offset: read_lines(item), cycle_length=args.cycle):
        pause(args.cost / 4)
        out("read", r, record.numpy().decode())
    return "exhausted"


def torch(args, r):
    from torch.utils.data import DataLoader

    from worker_sdk.torch import WorkQueueDataset

    reader = read_lines if args.reader else None
    loader = DataLoader(WorkQueueDataset(queue_for(args, r), reader=reader), batch_size=None, num_workers=args.loaders)
    for element in loader:
        pause(args.cost / 4)
        if args.reader:
            out("read", r, element.decode())
        else:
            for record in records_of(element):
                out("read", r, record)
    return "exhausted"


def two_queues(args, r):
    """Two queues read in lockstep by one loop: one item of each per step, until both end."""
    streams = {name: iter(queue_for(args, r, name).items()) for name in (f"{args.name}-a", f"{args.name}-b")}
    while streams:
        for name in list(streams):
            try:
                item = next(streams[name])
            except StopIteration:
                del streams[name]
                continue
            pause(args.cost)
            for record in records_of(item):
                out("read", r, f"{name[-1]}:{record}")
    return "exhausted"


def two_threads(args, r):
    """Two consumers of one queue in one process, each in its own thread."""
    queue = queue_for(args, r)

    def consume():
        for item in queue.items():
            pause(args.cost)
            for record in records_of(item):
                out("read", r, record)

    threads = [threading.Thread(target=consume) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return "exhausted"


def main():
    # A hung round is diagnosed by the test: SIGUSR1 prints every thread's
    # stack (loader processes inherit the handler).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    parser = argparse.ArgumentParser()
    parser.add_argument("shape", choices=SHAPES)
    parser.add_argument("--me", type=int, required=True)
    parser.add_argument("--parties", type=int, required=True)
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--barrier", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--cost", type=float, default=0.02)
    parser.add_argument("--lease-timeout", type=float, default=30)
    parser.add_argument("--cycle", type=int, default=2)
    parser.add_argument("--loaders", type=int, default=0)
    parser.add_argument("--reader", action="store_true")
    parser.add_argument("works", nargs="+")
    args = parser.parse_args()
    if args.shape in ("take_graph", "input_producer"):
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
    shape = globals()[args.shape]
    folder = Path(args.barrier)
    for r in range(args.rounds):
        meeting = folder / f"round{r}"
        meeting.mkdir(exist_ok=True)
        arrive_and_wait(meeting, str(args.me), args.parties, timeout=120)
        out("end", r, shape(args, r))
    out("finished", os.getpid())


if __name__ == "__main__":
    sys.exit(main())
