"""Reading a slice named without its byte offset: the skip to its first record, side by side.

Usage:  .venv/bin/python bench/slice_skip.py [--lines 2000,200000] [--slices 4,100] [--repeats 5]

A job's works may name slices themselves (``path?start=S&end=E``, as
bench/ddp_sync.py's planned epochs do); their leases carry no byte offset,
so the reader skips S records from the file's start. For each file size
(--lines lines of ``a,b,label``, cut into --slices slices), every slice of
the file is read once, three ways, in turn, --repeats times:

  offset     ``readers.records(item, offset)``: seeks to the slice's byte
             (what a slice made by the server's slicing carries); the floor
  skip       ``readers.records(item)``: no offset, the reader's skip
  line by line  the whole file's lines, ``itertools.islice``d to the slice:
             what skipping record by record costs (the reader's skip before
             it counted line ends a chunk at a time)

Prints the median microseconds per record trained on (the slices' records,
not the lines skipped) and each against ``offset``.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import tempfile
import time
from pathlib import Path

import _env  # noqa: F401  (it sets up the project)

from worker_sdk import readers


def write(path: Path, lines: int) -> list[int]:
    """The file's lines, and the byte each starts at."""
    rng = random.Random(2026)
    starts, rows, at = [], [], 0
    for _ in range(lines):
        a, b = rng.uniform(-1, 1), rng.uniform(-1, 1)
        row = f"{a:.5f},{b:.5f},{int(a + b > 0)}\n"
        starts.append(at)
        at += len(row)
        rows.append(row)
    path.write_text("".join(rows))
    return starts


def timed(read, spans) -> float:
    began = time.perf_counter()
    count = 0
    for start, end in spans:
        for _record in read(start, end):
            count += 1
    return (time.perf_counter() - began) / count * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", default="2000,200000", help="lines per file, comma-separated")
    parser.add_argument("--slices", default="4,100", help="slices per file, one per --lines")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="shardline-slice-skip-"))
    print("| lines | slices | offset (us/record) | skip | line by line |")
    print("|---:|---:|---:|---:|---:|")
    for lines, count in zip(map(int, args.lines.split(",")), map(int, args.slices.split(","))):
        path = folder / f"lines-{lines}.csv"
        starts = write(path, lines)
        edges = [round(i * lines / count) for i in range(count + 1)]
        spans = list(zip(edges, edges[1:]))
        ways = {
            "offset": lambda s, e: readers.records(f"{path}?start={s}&end={e}", starts[s]),
            "skip": lambda s, e: readers.records(f"{path}?start={s}&end={e}"),
            "line by line": lambda s, e: itertools.islice(readers.records(str(path)), s, e),
        }
        times = {way: [] for way in ways}
        for _ in range(args.repeats):
            for way, read in ways.items():
                times[way].append(timed(read, spans))
        median = {way: statistics.median(values) for way, values in times.items()}
        cells = [f"{median['offset']:.3f}"] + [
            f"{median[way]:.3f} ({median[way] / median['offset']:.2f}x)" for way in ("skip", "line by line")
        ]
        print(f"| {lines:,} | {count} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
