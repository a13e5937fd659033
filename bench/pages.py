"""Dashboard page times on a job of a million items (target: each under 200 ms).

Usage:  .venv/bin/python bench/pages.py [--items 1000000] [--done-rounds 100] [--repeat 20]

Creates a job of --items works (or reuses the one a previous run made), runs
--done-rounds takes of 1,000 items through the lease service completing the
previous 1,000 (so the page has done, leased and pending items, workers and a
throughput curve), then renders each page --repeat times in-process with
Django's test client, logged in, and prints the median and the slowest.
Uses DATABASE_URL when set, else the embedded Postgres.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import _env  # noqa: F401  (it sets up the project)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--done-rounds", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from server.models import Job
    from server.services import accounts, jobs, leases
    from worker_sdk.protocol import Completion, TakeRequest

    call_command("migrate", verbosity=0, interactive=False)
    name = f"bench-pages-{args.items}"
    job = Job.objects.filter(name=name).first()
    if job is None:
        began = time.perf_counter()
        spec = jobs.JobSpec(
            name=name,
            works=[f"/bench/part-{i:07d}.parquet" for i in range(args.items)],
            num_epochs=3,
            lease_timeout=3600.0,
        )
        job, _ = jobs.create_or_attach(spec)
        print(f"created job {name} ({args.items:,} items per epoch, 3 epochs) in {time.perf_counter() - began:.1f} s")
        held = []
        for round_ in range(args.done_rounds):
            result = leases.take(job.id, TakeRequest(f"bench-worker-{round_ % 8}", count=1000, complete=tuple(held)))
            held = [Completion(lease.id, lease.token) for lease in result.leases]
        print(f"completed {(args.done_rounds - 1) * 1000:,} items through the lease service")

    user, _ = accounts.ensure_user("bench-admin", "admin")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    pages = {
        "jobs list": "/",
        "jobs table (live)": "/jobs/table/",
        "job page": f"/jobs/{job.id}/",
        "job live fragment": f"/jobs/{job.id}/live/",
        "audit, first page": f"/jobs/{job.id}/audit/",
        "audit, one worker": f"/jobs/{job.id}/audit/?worker=bench-worker-3&state=done",
        "watermarks API": f"/api/v1/jobs/{job.id}/watermarks/",
    }
    print(f"\n{'page':<22}{'median ms':>10}{'max ms':>9}   (target < 200 ms; watermarks < 50 ms)")
    for label, url in pages.items():
        assert client.get(url).status_code == 200, url  # warm up, and check it renders
        times = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - began) * 1000)
            assert response.status_code == 200
        print(f"{label:<22}{statistics.median(times):>10.1f}{max(times):>9.1f}")
    print(f"\nmachine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
