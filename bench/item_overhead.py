"""The SDK's time on the training thread per item: a loop over many tiny items, as users write it.

Usage:  .venv/bin/python bench/item_overhead.py [--items 10000] [--compute-ms 0] [--shapes items,torch0,loader2,take,dataset1,dataset4]
                                               [--look-ahead 0,1,auto]

One job of --items item strings (no files: the loop reads nothing), one
consumer, the ASGI server of tests/support.py (4 web processes). Each shape
is timed on the training thread alone: from the moment the loop body ends to
the moment the next item arrives, which is what the SDK costs the loop
(the issue's bar: a median under 50 us). The body itself "trains" for
--compute-ms.

  items    for item in queue.items(): ...
  torch0   for item in DataLoader(WorkQueueDataset(queue), batch_size=None): ...
  loader2  the same through WorkQueueLoader with num_workers=2 (loader processes take)
  take     while True: item = queue.take()  (eager TensorFlow, until OutOfRangeError)
  dataset1 for record in queue.dataset(reader=..., cycle_length=1).as_numpy_iterator(): ...
           (each item read as one record, so that the wait between items is the SDK's)
  dataset4 the same, cycle_length=4

Each shape runs once per --look-ahead depth (WorkQueue's look_ahead: items
taken ahead on a thread while the loop works; 0 takes when asked; auto is
the default, None: one, and more for a loop quicker than a take), side by
side in one run. Beside them, the same loop over a Python list of the items:
the floor of the loop itself (and, with a dataset shape, the same list
through tf.data's from_generator: the floor of a TF loop). Prints each shape's median, p90 and p99 microseconds per item and
its items per second. Uses DATABASE_URL when set, else the embedded Postgres.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

import _env  # noqa: F401  (first: it sets up the project)
from _env import percentile, serve, tf_records

SHAPES = ("items", "torch0", "loader2", "take", "dataset1", "dataset4")


def one_record(item: str, offset) -> list[bytes]:
    """A dataset's reader: each item is one record (its string)."""
    return [item.encode()]


def takes(queue):
    """Eager ``take()`` until the queue's end, as a TF2 loop calls it."""
    import tensorflow as tf

    while True:
        try:
            yield queue.take()
        except tf.errors.OutOfRangeError:
            return


def loop(shape: str, queue):
    if shape == "items":
        return queue.items()
    if shape == "take":
        return takes(queue)
    if shape.startswith("dataset"):
        # The TF runtime is set up as the iterator is made, before the clock starts.
        return queue.dataset(reader=one_record, cycle_length=int(shape[len("dataset") :])).as_numpy_iterator()
    from torch.utils.data import DataLoader

    from worker_sdk.torch import WorkQueueDataset, WorkQueueLoader

    if shape == "torch0":
        return iter(DataLoader(WorkQueueDataset(queue), batch_size=None))
    return iter(WorkQueueLoader(WorkQueueDataset(queue), batch_size=None, num_workers=2))


def tf_list(works: list[str]):
    """The items through ``tf.data.Dataset.from_generator``, with the options ``dataset()`` sets."""
    return tf_records(lambda: (work.encode() for work in works))


def timed(items, compute: float) -> tuple[list[float], float, int]:
    """Microseconds the loop waited for each item, the loop's seconds, and the items read."""
    waits = []
    began = time.perf_counter()
    asked = began
    for _item in items:
        waits.append((time.perf_counter() - asked) * 1e6)
        if compute:
            time.sleep(compute)
        asked = time.perf_counter()
    return waits, time.perf_counter() - began, len(waits)


def report(label: str, waits: list[float], seconds: float, count: int) -> None:
    print(
        f"  {label:<10} median {percentile(waits, 0.5):9.1f} us  p90 {percentile(waits, 0.9):9.1f} us  "
        f"p99 {percentile(waits, 0.99):9.1f} us  {count / seconds:8.0f} items/s  ({count} items)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--compute-ms", type=float, default=0.0)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument(
        "--look-ahead", default="0,1,auto", help="depths to compare, comma-separated (auto: the default)"
    )
    args = parser.parse_args()
    depths = [None if depth == "auto" else int(depth) for depth in args.look_ahead.split(",")]
    shapes = args.shapes.split(",")
    for shape in shapes:
        if shape not in SHAPES:
            parser.error(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")

    from worker_sdk import WorkQueue

    server, key = serve("item overhead bench")
    works = [f"/tiny/{i}" for i in range(args.items)]
    compute = args.compute_ms / 1000
    print(f"{args.items} items, {args.compute_ms} ms of compute each; the loop's wait for each item:", flush=True)
    try:
        report("list", *timed(iter(list(works)), compute))
        if any(shape.startswith("dataset") for shape in shapes):
            # The floor of a TF loop: tf.data's own hand-over of each element from a Python generator.
            report("tf list", *timed(tf_list(works), compute))
        for shape in shapes:
            for depth in depths:
                queue = WorkQueue(
                    works,
                    shuffle=False,
                    name=f"overhead-{shape}-{uuid.uuid4().hex[:8]}",
                    url=server.url,
                    token=key,
                    look_ahead=depth,
                )
                queue.job  # noqa: B018  (created before the clock starts)
                waits, seconds, count = timed(loop(shape, queue), compute)
                queue.close()
                if count != args.items:
                    print(f"  {shape}: read {count} of {args.items} items", file=sys.stderr)
                report(f"{shape}@{'auto' if depth is None else depth}", waits, seconds, count)
    finally:
        server.stop()
    print(f"machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
