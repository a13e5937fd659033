"""Slicing cost beside the I/O floor, measured side by side in one run.

Usage:  .venv/bin/python bench/slicing.py [--parts files,tables] [--lines 10000000] [--parquet-rows 100000000]
            [--tables postgres,delta,iceberg] [--pg-rows 10000000] [--lake-rows 10000000] [--lake-files 100]
            [--dir /tmp/shardline-bench]

1. A generated CSV of --lines lines (about 1 GB at the default) is sliced into
   1,000 slices (scan + offsets of every slice start), beside `wc -l` on the
   same file. Both run three times, alternating, on a warm page cache; the
   medians are compared. Target: slicing <= 2x `wc -l`.
2. A Parquet dataset of --parquet-rows rows in 10 files is counted from its
   footers and sliced into 1,000 slices. Target: under 1 s.
3. Reading one slice of 1,000 (seeking to its offset) beside reading the whole
   file through the same reader. Target: about 1/1,000 of the time.
4. Tables (--tables, docs/tables.md): a Postgres table of --pg-rows rows (in
   the benchmark database: DATABASE_URL, else the embedded Postgres; made
   once, kept in schema bench_tables), and Delta and Iceberg tables of
   --lake-files Parquet files (--lake-rows rows in all, under --dir), each
   resolved to one version and sliced into --slices; then one slice read
   beside the whole table through the same reader. For Postgres, also what
   reading as of the slicing snapshot costs: one slice's scan with and
   without the visibility check, alternating, medians compared.
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


def postgres_table(rows: int) -> str:
    """A table work of ``rows`` rows (id bigint primary key, a 60-byte payload) in the benchmark database."""
    import psycopg
    from django.conf import settings

    from tests.support import database_url

    url = database_url(settings.DATABASES["default"]).replace("postgres://", "postgresql://", 1)
    table = f"bench_tables.events_{rows}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE SCHEMA IF NOT EXISTS bench_tables")
        exists = connection.execute("SELECT to_regclass(%s)", [table]).fetchone()[0]
        if exists is None:
            began = time.perf_counter()
            connection.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, payload text NOT NULL)")
            connection.execute(
                f"INSERT INTO {table} SELECT g, md5(g::text) || md5((g * 7)::text) FROM generate_series(1, {rows}) AS g"
            )
            connection.execute(f"VACUUM ANALYZE {table}")
            print(f"  (made {table} in {time.perf_counter() - began:.0f} s)")
    # The benchmark's tables live in the server's own database: a connection
    # that says so (allow_own_database), for the slicer and the readers alike.
    from server.conf import env_pg_connections

    os.environ["SHARDLINE_PG_CONNECTION_BENCH"] = f"{url}{'&' if '?' in url else '?'}allow_own_database=1"
    settings.SHARDLINE_PG_CONNECTIONS = env_pg_connections()
    return f"postgresql://bench?table={table}"


def table_rows(kind: str, args) -> None:
    from server import tables
    from server.services.slicing import plan
    from worker_sdk import readers

    if kind == "postgres":
        work, label = postgres_table(args.pg_rows), f"{args.pg_rows:,} rows"
    else:
        import lake_tables

        work = lake_tables.make(kind, Path(args.dir) / f"{kind}-{args.lake_rows}-{args.lake_files}", args)
        label = f"{args.lake_rows:,} rows in {args.lake_files} files"

    def slice_table():
        works, pinned = tables.expand(work, None)  # None: any file (the benchmark's own)
        try:
            return plan(works, args.slices), pinned
        finally:
            tables.release(works)

    elapsed, (units, pinned) = timed(slice_table)
    print(f"{kind}: {label} (version {pinned['version']}) sliced into {len(units)} in {elapsed:.2f} s")
    item, offset, _start, _end, source = units[len(units) // 2]
    one_time, one_count = timed(lambda: sum(1 for _ in readers.records(item, offset, source=source)), 7)
    whole_time, whole_count = timed(
        lambda: sum(1 for unit in units for _ in readers.records(unit[0], unit[1], source=unit[4])), 1
    )
    print(
        f"  one slice: {one_count:,} rows in {one_time * 1000:.1f} ms; the whole table: {whole_count:,} in "
        f"{whole_time:.1f} s; one slice / whole table = 1/{whole_time / one_time:,.0f}  (target about 1/{args.slices})"
    )
    if kind == "postgres":
        snapshot_check(item, source)


def snapshot_check(item: str, source: dict) -> None:
    """One slice's scan with and without pgtable's visibility check (the cost of reading as of the snapshot)."""
    from psycopg import sql

    from worker_sdk import formats, pgtable

    piece = formats.parse(item)
    with pgtable.connect(piece.path) as connection:
        table = sql.SQL(".").join(sql.Identifier(part) for part in pgtable.table_name(piece.path))
        values = {
            "from0": source["from"][0],
            "to0": source["to"][0],
            "as_of": pgtable.param(piece.path, "as_of"),
            "now": pgtable.current_xid(connection),
        }
        plain = sql.SQL("SELECT * FROM {} WHERE id >= %(from0)s AND id < %(to0)s ORDER BY id").format(table)
        checked = sql.SQL("SELECT * FROM {} WHERE id >= %(from0)s AND id < %(to0)s AND {} ORDER BY id").format(
            table, pgtable.visible(sql)
        )
        times = {"plain": [], "checked": []}
        for _ in range(7):
            for name, query in (("plain", plain), ("checked", checked)):
                began = time.perf_counter()
                rows = connection.execute(query, values).fetchall()
                times[name].append(time.perf_counter() - began)
        plain_ms, checked_ms = (statistics.median(times[name]) * 1000 for name in ("plain", "checked"))
        print(
            f"  as of the snapshot: a slice's scan ({len(rows):,} rows) {checked_ms:.1f} ms with the visibility check,"
            f" {plain_ms:.1f} ms without: {checked_ms / plain_ms:.2f}x"
        )


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
    parser.add_argument("--parts", default="files,tables", help="files (1-3), tables (4), or both")
    parser.add_argument("--tables", default="postgres,delta,iceberg")
    parser.add_argument("--pg-rows", type=int, default=10_000_000)
    parser.add_argument("--lake-rows", type=int, default=10_000_000)
    parser.add_argument("--lake-files", type=int, default=100)
    args = parser.parse_args()
    parts = set(args.parts.split(","))

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "server.settings")
    os.environ.setdefault("SECRET_KEY", "benchmark-only-not-secret")
    import django

    django.setup()
    from server import sources
    from server.services.slicing import plan
    from worker_sdk import readers

    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    if "files" in parts:
        files_part(args, folder, sources, plan, readers)
    if "tables" in parts:
        for kind in args.tables.split(","):
            table_rows(kind, args)
    print(f"machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")


def files_part(args, folder, sources, plan, readers) -> None:
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

    item, offset, *_rest = units[len(units) // 2]
    one_time, one_count = timed(lambda: sum(1 for _ in readers.records(item, offset)))
    whole_time, whole_count = timed(lambda: sum(1 for _ in readers.records(str(csv_path))), 1)
    print(
        f"Reading one slice: {one_count:,} records in {one_time * 1000:.1f} ms; the whole file: {whole_count:,} in {whole_time:.2f} s"
    )
    print(f"  one slice / whole file = 1/{whole_time / one_time:,.0f}  (target about 1/{args.slices})")


if __name__ == "__main__":
    main()
