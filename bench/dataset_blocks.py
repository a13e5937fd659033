"""Small records through ``WorkQueue.dataset()``: one at a time, and in blocks (``hand_over_seconds``), side by side.

Usage:  .venv/bin/python bench/dataset_blocks.py [--records 20000] [--slices 4] [--batch 256] [--rounds 2]
                                                [--hand-over 0.01]

One job of --records short CSV lines in --slices explicit slices of one
file, one consumer, the ASGI server of tests/support.py (4 web processes).
Each arm reads the whole job in the loop's own process and prints records
per second, with and without ``.batch(--batch)`` after the dataset (the
pipeline users write for small records):

  dataset1 / dataset4   queue.dataset(cycle_length=1 or 4): records handed to TensorFlow one by one
  blocks1 / blocks4     the same with hand_over_seconds=--hand-over: in blocks, unbatched inside TensorFlow

Beside them, two floors without Shardline, in the same run: the file
through ``tf.data.TextLineDataset`` and the lines through
``tf.data.Dataset.from_generator`` one by one. Arms run in turn, --rounds
times (the machine is noisy); each row prints every round and the ratio of
its best round to the best of its one-by-one arm. Every Shardline arm checks
that it read every record exactly once. Uses DATABASE_URL when set, else
the embedded Postgres.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import _env  # noqa: F401  (first: it sets up the project)
from _env import serve

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ARMS = ("dataset1", "blocks1", "dataset4", "blocks4")


def timed(records) -> tuple[float, list]:
    began = time.perf_counter()
    got = list(records)
    return time.perf_counter() - began, got


def flat(elements, batched: bool) -> list:
    return [record for batch in elements for record in batch] if batched else list(elements)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hand-over", type=float, default=0.01, help="the blocks arms' hand_over_seconds")
    args = parser.parse_args()

    import tensorflow as tf

    from worker_sdk import WorkQueue

    folder = Path(tempfile.mkdtemp(prefix="shardline-blocks-"))
    path = folder / "lines.csv"
    path.write_text("".join(f"{i},x\n" for i in range(args.records)))
    lines = path.read_bytes().splitlines()
    edges = [round(i * args.records / args.slices) for i in range(args.slices + 1)]
    works = [f"{path}?start={a}&end={b}" for a, b in zip(edges, edges[1:])]
    server, key = serve("dataset blocks bench")

    def shardline(arm: str, batched: bool):
        queue = WorkQueue(works, shuffle=False, name=f"blocks-{uuid.uuid4().hex[:8]}", url=server.url, token=key)
        queue.job  # attached before the clock starts
        cycle_length = int(arm[-1])
        seconds = args.hand_over if arm.startswith("blocks") else 0.0
        dataset = queue.dataset(cycle_length=cycle_length, hand_over_seconds=seconds)
        try:
            took, got = timed((dataset.batch(args.batch) if batched else dataset).as_numpy_iterator())
        finally:
            queue.close()
        records = flat(got, batched)
        if Counter(records) != Counter(lines):
            raise SystemExit(f"{arm}: read {len(records)} records, not each of {len(lines)} once")
        return took

    def floor(kind: str, batched: bool):
        if kind == "TextLineDataset":
            dataset = tf.data.TextLineDataset(str(path))
        else:
            dataset = tf.data.Dataset.from_generator(lambda: iter(lines), output_signature=tf.TensorSpec([], tf.string))
        return timed((dataset.batch(args.batch) if batched else dataset).as_numpy_iterator())[0]

    rows = [("TextLineDataset", floor), ("from_generator", floor)] + [(arm, shardline) for arm in ARMS]
    seconds: dict[tuple[str, bool], list[float]] = {}
    try:
        for _ in range(args.rounds):
            for batched in (False, True):
                for name, run in rows:
                    seconds.setdefault((name, batched), []).append(run(name, batched))
    finally:
        server.stop()

    print(
        f"{args.records} records in {args.slices} slices, one consumer; records/s per round, "
        f"and the best round against the same cycle length one by one"
    )
    for batched in (False, True):
        print(f"  {'after .batch(%d)' % args.batch if batched else 'record by record'}:")
        for name, _run in rows:
            rates = [args.records / s for s in seconds[(name, batched)]]
            cells = "  ".join(f"{rate:>9,.0f}" for rate in rates)
            ratio = ""
            if name.startswith("blocks"):
                base = max(args.records / s for s in seconds[("dataset" + name[-1], batched)])
                ratio = f"  {max(rates) / base:6.1f}x dataset{name[-1]}"
            print(f"    {name:<16} {cells}{ratio}")
    print(f"machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}; TensorFlow {tf.__version__}")


if __name__ == "__main__":
    main()
