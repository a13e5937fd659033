"""Scale: the lease path on a job of a million items against a job of a thousand.

Usage:  .venv/bin/python bench/scale.py [--items 1000000] [--samples 1000]

In one run, on the same machine and database:
  * creation time of a 1,000-item and a --items-item job (100 epochs, later
    epochs materialised lazily);
  * take+complete latency (one item, the previous one completed in the same
    call, through the lease service in-process) at the start, the middle and
    the end of the big job's first epoch, beside the small job's;
  * watermarks (API selector) and job page (dashboard, rendered in-process,
    logged in) times at those points, and the item table's dead rows;
  * table and index size per million items.
The big job is driven from point to point with batched takes of 1,000.
Uses DATABASE_URL when set, else the embedded Postgres. Dead rows only go
away when autovacuum runs: the script prints the server's autovacuum settings,
and warns when autovacuum is off (then the end-of-epoch figures show what a
server without vacuum does, not what Shardline does).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid

from _env import percentile  # first: it sets up the project


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from server import progress
    from server.models import Job
    from server.services import accounts, jobs, leases
    from worker_sdk.protocol import Completion, TakeRequest

    call_command("migrate", verbosity=0, interactive=False)
    tag = uuid.uuid4().hex[:6]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('server_version'), current_setting('autovacuum'), current_setting('autovacuum_naptime')"
        )
        version, autovacuum, naptime = cursor.fetchone()
    print(f"Postgres {version}; autovacuum {autovacuum}, naptime {naptime}")
    if autovacuum != "on":
        print(
            "WARNING: autovacuum is off on this server: dead item rows are never removed, and takes slow down as an epoch proceeds"
        )
    user, _ = accounts.ensure_user("bench-admin", "admin")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)

    def create(count):
        spec = jobs.JobSpec(
            name=f"scale-{count}-{tag}",
            works=[f"/scale/part-{i:07d}.parquet" for i in range(count)],
            num_epochs=100,
            lease_timeout=3600.0,
        )
        began = time.perf_counter()
        job, _ = jobs.create_or_attach(spec)
        return job, time.perf_counter() - began

    small, small_created = create(1000)
    big, big_created = create(args.items)
    print(
        f"created: 1,000 items x 100 epochs in {small_created:.2f} s; {args.items:,} items x 100 epochs in {big_created:.2f} s (target < 10 s)",
        flush=True,
    )

    def latency(job, worker):
        held, times = [], []
        for _ in range(args.samples):
            began = time.perf_counter()
            result = leases.take(job.id, TakeRequest(worker, count=1, complete=tuple(held)))
            times.append((time.perf_counter() - began) * 1000)
            held = [Completion(lease.id, lease.token) for lease in result.leases]
        if held:
            leases.take(job.id, TakeRequest(worker, count=1, complete=tuple(held)))
        return statistics.median(times), percentile(times, 0.99)

    def watermarks_ms(job):
        job = Job.objects.get(pk=job.id)
        times = []
        for _ in range(20):
            began = time.perf_counter()
            progress.of(job).as_watermarks()
            times.append((time.perf_counter() - began) * 1000)
        return statistics.median(times)

    def page_ms(job):
        times = []
        for _ in range(10):
            began = time.perf_counter()
            response = client.get(f"/jobs/{job.id}/")
            times.append((time.perf_counter() - began) * 1000)
            assert response.status_code == 200
        return statistics.median(times)

    def dead_rows():
        with connection.cursor() as cursor:
            cursor.execute("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'shardline_item'")
            return cursor.fetchone()[0]

    def measure(label, job, worker):
        p50, p99 = latency(job, worker)
        rows.append((label, p50, p99, watermarks_ms(job), page_ms(job), dead_rows()))

    def drive(job, until_done):
        held = []
        while True:
            done = progress.of(Job.objects.get(pk=job.id)).epochs[0].done
            if done >= until_done:
                break
            result = leases.take(job.id, TakeRequest("driver", count=1000, complete=tuple(held)))
            held = [Completion(lease.id, lease.token) for lease in result.leases]
        if held:
            leases.take(job.id, TakeRequest("driver", count=1, complete=tuple(held)))

    rows = []
    measure("1,000-item job", small, "probe")
    for label, fraction in (("start", 0.0), ("middle", 0.5), ("end", 0.98)):
        began = time.perf_counter()
        drive(big, int(args.items * fraction))
        driven = time.perf_counter() - began
        measure(f"{args.items:,}-item job, {label}", big, f"probe-{label}")
        if driven > 1:
            print(f"  (drove the big job to {fraction:.0%} of epoch 0 in {driven:.0f} s)", flush=True)

    print(
        f"\n{'point':<34}{'take p50 ms':>12}{'take p99 ms':>12}{'watermarks ms':>15}{'job page ms':>13}{'dead rows':>11}"
    )
    for label, p50, p99, marks, page, dead in rows:
        print(f"{label:<34}{p50:>12.2f}{p99:>12.2f}{marks:>15.1f}{page:>13.1f}{dead:>11,}")
    base50, base99 = rows[0][1], rows[0][2]
    worst50 = max(r[1] for r in rows[1:])
    worst99 = max(r[2] for r in rows[1:])
    print(f"\nbig / small: p50 {worst50 / base50:.2f}x, p99 {worst99 / base99:.2f}x (target <= 1.2x)")

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_total_relation_size('shardline_item'), pg_total_relation_size('shardline_unit'), (SELECT count(*) FROM shardline_item)"
        )
        item_bytes, unit_bytes, item_rows = cursor.fetchone()
    per_million = (item_bytes + unit_bytes) / max(item_rows, 1) * 1_000_000 / 1e6
    print(
        f"items + units on disk: {(item_bytes + unit_bytes) / 1e6:.0f} MB for {item_rows:,} item rows (about {per_million:.0f} MB per million items, indexes included)"
    )
    print(f"machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
