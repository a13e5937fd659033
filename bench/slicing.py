"""Slicing cost beside the I/O floor, measured side by side in one run.

Usage:  .venv/bin/python bench/slicing.py [--lines 10000000] [--parquet-rows 100000000] [--dir /tmp/shardline-bench]

1. A generated CSV of --lines lines (about 1 GB at the default) is sliced into
   1,000 slices (scan + offsets of every slice start), beside `wc -l` on the
   same file. Both run three times, alternating, on a warm page cache; the
   medians are compared. Target: slicing <= 2x `wc -l`.
2. A Parquet dataset of --parquet-rows rows in 10 files is counted from its
   footers and sliced into 1,000 slices. Target: under 1 s.
3. Reading one slice of 1,000 (seeking to its offset) beside reading the whole
   file through the same reader. Target: about 1/1,000 of the time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def make_csv(path: Path, lines: int) -> None:
    if path.exists() and path.stat().st_size > 0:
        return
    row = "{:010d},user_{:08d},item_{:08d},0.{:06d},clicked,{:04d}-01-01,some,padding,to,about,a,hundred,bytes\n"
    batch = 100_000
    with open(path, "w") as handle:
        for start in range(0, lines, batch):
            handle.write(
                "".join(
                    row.format(i, i % 99991, i % 77773, i % 999983, 2000 + i % 26)
                    for i in range(start, min(lines, start + batch))
                )
            )


def make_parquet(folder: Path, rows: int, files: int = 10) -> list[Path]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    per_file = rows // files
    for index in range(files):
        path = folder / f"part-{index:02d}.parquet"
        if not path.exists():
            ids = np.arange(index * per_file, (index + 1) * per_file, dtype=np.int64)
            table = pa.table({"id": ids, "label": (ids % 2).astype(np.int8)})
            pq.write_table(table, path, row_group_size=1_000_000)
        paths.append(path)
    return paths


def timed(fn, repeat=3):
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times), result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=10_000_000)
    parser.add_argument("--parquet-rows", type=int, default=100_000_000)
    parser.add_argument("--slices", type=int, default=1000)
    parser.add_argument("--dir", default="/tmp/shardline-bench")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "server.settings")
    os.environ.setdefault("SECRET_KEY", "benchmark-only-not-secret")
    import django

    django.setup()
    from server import sources
    from server.services.slicing import plan
    from worker_sdk import readers

    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    csv_path = folder / f"lines-{args.lines}.csv"
    began = time.perf_counter()
    make_csv(csv_path, args.lines)
    size = csv_path.stat().st_size
    print(f"CSV: {csv_path} ({size / 1e9:.2f} GB, {args.lines:,} lines; ready in {time.perf_counter() - began:.1f} s)")

    def slice_csv():
        work = sources.expand(str(csv_path))[0]
        sources.count(work)
        return plan([work], args.slices)

    def wc():
        return subprocess.run(["wc", "-l", str(csv_path)], capture_output=True, check=True).stdout

    wc()  # warm the page cache for both
    wc_times, slice_times = [], []
    for _ in range(3):
        wc_times.append(timed(wc, 1)[0])
        elapsed, units = timed(slice_csv, 1)
        slice_times.append(elapsed)
    assert len(units) == args.slices
    wc_median, slice_median = statistics.median(wc_times), statistics.median(slice_times)
    print(f"  wc -l              {wc_median:7.2f} s   ({size / wc_median / 1e9:.2f} GB/s)")
    print(f"  slice into {args.slices:<6}  {slice_median:7.2f} s   ({size / slice_median / 1e9:.2f} GB/s)")
    print(f"  ratio              {slice_median / wc_median:7.2f}x   (target <= 2x)")

    parquet_paths = make_parquet(folder / f"parquet-{args.parquet_rows}", args.parquet_rows)

    def slice_parquet():
        works = [w for p in parquet_paths for w in sources.expand(str(p))]
        for work in works:
            sources.count(work)
        return plan(works, args.slices)

    parquet_time, parquet_units = timed(slice_parquet)
    print(
        f"Parquet: {args.parquet_rows:,} rows in {len(parquet_paths)} files sliced into {len(parquet_units)} from metadata in {parquet_time * 1000:.0f} ms (target < 1 s)"
    )

    item, offset = units[len(units) // 2]
    one_time, one_count = timed(lambda: sum(1 for _ in readers.records(item, offset)))
    whole_time, whole_count = timed(lambda: sum(1 for _ in readers.records(str(csv_path))), 1)
    print(
        f"Reading one slice: {one_count:,} records in {one_time * 1000:.1f} ms; the whole file: {whole_count:,} in {whole_time:.2f} s"
    )
    print(f"  one slice / whole file = 1/{whole_time / one_time:,.0f}  (target about 1/{args.slices})")
    print(f"machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
