"""Scale: the lease path on a job of a million items against a job of a thousand.

Usage:  .venv/bin/python bench/scale.py [--items 1000000] [--samples 300]

In one run, on the same machine and database:
  * creation time of a 1,000-item and a --items-item job (100 epochs, later
    epochs materialised lazily);
  * take+complete latency (one item, the previous one completed in the same
    call, through the lease service in-process) at the start, the middle and
    the end of the big job's first epoch, beside the small job's;
  * watermarks time at those points;
  * table and index size per million items, and dead tuples after the run.
The big job is driven from point to point with batched takes of 1,000.
Uses DATABASE_URL when set, else the embedded Postgres.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "server.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")
# Benchmarks serve nobody: a throw-away key when none is set (DATABASE_URL makes one required).
os.environ.setdefault("SECRET_KEY", "benchmark-only-not-secret")


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from server import selectors
    from server.models import Job
    from server.services import jobs, leases

    call_command("migrate", verbosity=0, interactive=False)
    tag = uuid.uuid4().hex[:6]

    def create(count):
        spec = jobs.JobSpec(name=f"scale-{count}-{tag}", works=[f"/scale/part-{i:07d}.parquet" for i in range(count)], num_epochs=100, lease_timeout=3600.0)
        began = time.perf_counter()
        job, _ = jobs.create_or_attach(spec)
        return job, time.perf_counter() - began

    small, small_created = create(1000)
    big, big_created = create(args.items)
    print(f"created: 1,000 items x 100 epochs in {small_created:.2f} s; {args.items:,} items x 100 epochs in {big_created:.2f} s (target < 10 s)")

    def latency(job, worker):
        held, times = [], []
        for _ in range(args.samples):
            began = time.perf_counter()
            result = leases.take(job.id, worker, 1, held)
            times.append((time.perf_counter() - began) * 1000)
            held = [leases.Completion(lease.id, lease.token) for lease in result.leases]
        if held:
            leases.take(job.id, worker, 1, held)
        return statistics.median(times), percentile(times, 0.99)

    def watermarks_ms(job):
        job = Job.objects.get(pk=job.id)
        times = []
        for _ in range(20):
            began = time.perf_counter()
            selectors.watermarks(job)
            times.append((time.perf_counter() - began) * 1000)
        return statistics.median(times)

    def drive(job, until_done):
        held = []
        while True:
            done = selectors.watermarks(Job.objects.get(pk=job.id))["epochs"][0]["done"]
            if done >= until_done:
                break
            result = leases.take(job.id, "driver", 1000, held)
            held = [leases.Completion(lease.id, lease.token) for lease in result.leases]
        if held:
            leases.take(job.id, "driver", 1, held)

    rows = []
    small_p50, small_p99 = latency(small, "probe")
    rows.append(("1,000-item job", small_p50, small_p99, watermarks_ms(small)))
    for label, fraction in (("start", 0.0), ("middle", 0.5), ("end", 0.98)):
        began = time.perf_counter()
        drive(big, int(args.items * fraction))
        driven = time.perf_counter() - began
        p50, p99 = latency(big, f"probe-{label}")
        rows.append((f"{args.items:,}-item job, {label}", p50, p99, watermarks_ms(big)))
        if driven > 1:
            print(f"  (drove the big job to {fraction:.0%} of epoch 0 in {driven:.0f} s)")

    print(f"\n{'point':<34}{'take p50 ms':>12}{'take p99 ms':>12}{'watermarks ms':>15}")
    for label, p50, p99, marks in rows:
        print(f"{label:<34}{p50:>12.2f}{p99:>12.2f}{marks:>15.1f}")
    base50, base99 = rows[0][1], rows[0][2]
    worst50 = max(r[1] for r in rows[1:])
    worst99 = max(r[2] for r in rows[1:])
    print(f"\nbig / small: p50 {worst50 / base50:.2f}x, p99 {worst99 / base99:.2f}x (target <= 1.2x)")

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE shardline_item")
        cursor.execute(
            "SELECT pg_total_relation_size('shardline_item'), pg_total_relation_size('shardline_unit'),"
            " (SELECT count(*) FROM shardline_item), (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'shardline_item')"
        )
        item_bytes, unit_bytes, item_rows, dead = cursor.fetchone()
    per_million = (item_bytes + unit_bytes) / max(item_rows, 1) * 1_000_000 / 1e6
    print(f"items + units on disk: {(item_bytes + unit_bytes) / 1e6:.0f} MB for {item_rows:,} item rows (about {per_million:.0f} MB per million items, indexes included); dead tuples in shardline_item: {dead:,}")
    print(f"machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
