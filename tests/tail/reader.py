"""One reading process of the liquid-tail tests: reads a sliced job in one consumer shape, slowly or fast.

Prints ``read <record>`` for every record its training loop got (whole
lines, flushed), then ``finished``. ``--delay`` is the seconds spent on each
record: the tests give one process a much longer delay, so that the others
run out of items while it still holds unread records, and splits happen.
"""

import argparse
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from tests.support import arrive_and_wait
from worker_sdk import WorkQueue, readers

SHAPES = ("ranges", "dataset", "dataset-blocks", "torch", "loader", "loader-batches")
_lock = threading.Lock()


def out(line: str) -> None:
    with _lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def read_lines(item, delay: float = 0.0, say: bool = False):
    for line in readers.records(item):
        time.sleep(delay)  # the reader's own work on a record (decoding)
        if say:
            out(f"produced {line.decode()}")  # from the loader process, before the loop has it
        yield line.decode()


class CollateFailed(ValueError):
    pass


def collate_failing_once(record: str, marker: Path, batch):
    """The DataLoader's collate_fn (batches of lines): raises on the first batch that holds ``record``."""
    if record in batch and not marker.exists():
        marker.touch()
        raise CollateFailed(f"a batch holding {record}")
    return batch


def main():
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # The SDK's own account on stderr, where the tests read it, with each
    # loader's take while a sibling reads; loader processes inherit it.
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(process)d %(name)s: %(message)s")
    logging.getLogger("worker_sdk.turns").setLevel(logging.DEBUG)
    parser = argparse.ArgumentParser()
    parser.add_argument("shape", choices=SHAPES)
    parser.add_argument("--name", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--slices", type=int, required=True, help="0: the works are items as they are")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--read-delay", type=float, default=0.0, help="the reader's seconds per record (loader shapes)")
    parser.add_argument("--worker", required=True)
    parser.add_argument("--barrier", required=True, help="a folder: every reader starts reading together")
    parser.add_argument("--parties", type=int, required=True)
    parser.add_argument("--die-after", type=int, default=0, help="SIGKILL itself after reading this many records")
    parser.add_argument("--stop-after", type=int, default=0, help="stop reading after this many records, and exit")
    parser.add_argument(
        "--say-produced", action="store_true", help="print each record a reader produces (loader shapes)"
    )
    parser.add_argument("--drop-last", action="store_true", help="the DataLoader drops a last batch that is not full")
    parser.add_argument(
        "--iterators", type=int, default=1, help="live iterators of one loader, read in turn (loader shapes)"
    )
    parser.add_argument(
        "--collate-fails-on",
        default="",
        help="the DataLoader's collate_fn raises, once, on the batch holding this record; the loop goes on (loader shapes)",
    )
    parser.add_argument("works", nargs="+")
    args = parser.parse_args()
    queue = WorkQueue(
        args.works, shuffle=False, num_slices=args.slices or None, name=args.name, run=args.run, worker=args.worker
    )

    read = 0

    def use(record):
        nonlocal read
        # Said as the loop receives it, before its work: a loop that dies in
        # its work (or is stopped by its DataLoader's error) had it.
        out(f"read {record.decode() if isinstance(record, bytes) else record}")
        read += 1
        if read == args.die_after:
            os.kill(os.getpid(), signal.SIGKILL)  # a crash: nothing acknowledged, nothing cleaned up
        time.sleep(args.delay)  # the loop's work on a record: its pace

    if args.shape.startswith("dataset"):
        import tensorflow  # noqa: F401  (imported before the barrier: it takes seconds)

    queue.job  # attached before the barrier too
    # Readers start together, so that the slow one gets its share before the fast ones run out.
    arrive_and_wait(Path(args.barrier), args.worker, args.parties)
    if args.shape == "ranges":
        for work in queue.ranges():
            for record in work.records():
                use(record)
    elif args.shape.startswith("dataset"):
        # dataset-blocks: records handed to TensorFlow in blocks of what the loop takes in 10 ms.
        hand_over = 0.01 if args.shape == "dataset-blocks" else 0.0
        records = queue.dataset(cycle_length=2, hand_over_seconds=hand_over).as_numpy_iterator()
        for record in records:
            use(record)
            if read == args.stop_after:
                break  # the training loop stops early: its iterator goes, and with it the dataset's reading
        del records
    else:
        import functools

        from torch.utils.data import DataLoader

        from worker_sdk import turns
        from worker_sdk.torch import WorkQueueDataset, WorkQueueLoader

        kind = DataLoader if args.shape == "torch" else WorkQueueLoader
        reader = functools.partial(read_lines, delay=args.read_delay, say=args.say_produced)
        # Batches of 8 hold the end of one slice and the start of the next.
        batch_size = 8 if args.shape == "loader-batches" else None
        collate = {}
        if args.collate_fails_on:
            collate["collate_fn"] = functools.partial(
                collate_failing_once, args.collate_fails_on, Path(args.barrier) / "collate-failed"
            )
        loader = kind(
            WorkQueueDataset(queue, reader=reader),
            batch_size=batch_size,
            num_workers=2,
            drop_last=args.drop_last,
            **collate,
        )
        live = [iter(loader) for _ in range(args.iterators)]  # each with loader processes of its own
        fed: set[int] = set()
        # The loop's own count of its waits for data, as worker_sdk.turns
        # counts them (each less its handover, the first less the pass's
        # start): what a loader's take while a sibling reads must follow.
        starved = 0.0
        turn = 0
        while live:
            batches = live[turn % len(live)]
            turn += 1
            asked = time.monotonic()
            try:
                batch = next(batches)
            except StopIteration:
                live.remove(batches)
                continue
            except CollateFailed as exc:
                out(f"collate failed: {exc}")
                continue  # the loop goes on past a batch it never got
            finally:
                waited = time.monotonic() - asked
                starved += max(
                    0.0, waited - (turns.HANDOVER_SECONDS if id(batches) in fed else turns.FIRST_BATCH_SECONDS)
                )
                fed.add(id(batches))
            for record in batch if batch_size else [batch]:
                use(record)  # a batch counts as read whole once the loop has it
            if read == args.stop_after:
                break  # the training loop stops early: its loader goes, and what it read ahead goes back
        out(f"loop starved {starved:.3f}")
        del batches, live, loader
    queue.close()
    out("finished")


if __name__ == "__main__":
    main()
