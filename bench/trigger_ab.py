"""Side effects of item state changes: written by each statement (A) or by one trigger (B).

Usage:  .venv/bin/python bench/trigger_ab.py [--baseline HEAD] [--rounds 5] [--seconds 6] [--clients 2]
                                            [--trigger-in-both]

  A  the statements of git revision --baseline, each writing its own counter
     deltas, completions per minute and worker credit; the trigger of
     migrations/0010 dropped
  B  the working tree's statements, the trigger installed

With --trigger-in-both, A keeps the trigger too: an A/B of the statements
alone (a change to take.sql or to the rules of server/sql/schema.sql it
calls, which both arms' databases hold).

The arms run at the same time, on two copies of one database (A's without
the trigger), each with --clients processes: whatever else loads the machine
during a round loads both arms alike, which alternating rounds on a busy
2-core machine did not achieve. Each round, on its own job (the same in both
copies):
  take         take.sql with the previous lease's completion, prepared, as
               bench/dispatch.py's raw-sql arm runs it
  heartbeat    each process holds 8 leases and runs extend.sql on them: an
               UPDATE of item rows that changes no state (B: the trigger runs
               and finds nothing to count)
  materialise  epoch 1 of the job (--items rows) by materialise_epoch.sql,
               both arms at once
Prints each round and the median over rounds of B / A for each measure.
Needs DATABASE_URL (a server where it may create two databases beside it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dispatch  # noqa: E402  (its clients, and _env's set-up of the project)
from _env import ROOT, percentile  # noqa: E402

HOLD = 8


def heartbeat_client(dsn: str, job: dict, seconds: float, start_at: float, out):
    try:
        out.put(_heartbeat_loop(dsn, job, seconds, start_at))
    except Exception as exc:
        out.put(exc)
        raise


def _heartbeat_loop(dsn: str, job: dict, seconds: float, start_at: float):
    import psycopg

    from server import sql

    worker = f"hb-{os.getpid()}"
    with psycopg.connect(dsn, cursor_factory=psycopg.ClientCursor, autocommit=True) as conn:
        cursor = conn.execute(job["take"], dispatch.take_params(job, worker, HOLD, []))
        held = dispatch.leased(cursor.fetchall(), dispatch.columns(cursor))
        text, names = sql.number(job["extend"])
        conn.execute(f"PREPARE shardline_extend AS {text}")
        execute = f"EXECUTE shardline_extend ({', '.join(['%s'] * len(names))})"
        params = {
            "ids": [h[0] for h in held],
            "tokens": [h[1] for h in held],
            "positions": [None] * len(held),
            "started": [False] * len(held),
            "waiting": None,
            "stall_clock": None,  # no data-stall counts with these heartbeats
            "stall_waited": None,
            "stall_busy": None,
            "holder": None,
            "scope": None,
        }
        values = [params[k] for k in names]
        latencies = []
        time.sleep(max(0, start_at - time.time()))
        deadline = time.time() + seconds
        while time.time() < deadline:
            began = time.perf_counter()
            extended = conn.execute(execute, values).fetchall()
            latencies.append(time.perf_counter() - began)
            if len(extended) != len(held):
                raise RuntimeError(f"heartbeat extended {len(extended)} of {len(held)} leases")
    return len(latencies), latencies


def materialise_client(dsn: str, job: dict, seconds: float, start_at: float, out):
    # Epoch 1 of the job, timed; `seconds` is unused (one statement).
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            time.sleep(max(0, start_at - time.time()))
            began = time.perf_counter()
            created = conn.execute(job["materialise_epoch"], {"job": job["id"], "epoch": 1}).fetchall()
            elapsed = time.perf_counter() - began
        if not created:
            raise RuntimeError("epoch 1 was not created")
        out.put((1, [elapsed]))
    except Exception as exc:
        out.put(exc)
        raise


def run_both(target, jobs_by_arm: dict, dsns: dict, clients: int, seconds: float) -> dict:
    """Runs ``clients`` processes of each arm at once; returns dispatch.run_arm's figures per arm."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    queues = {arm: context.Queue() for arm in jobs_by_arm}
    start_at = time.time() + 2.0
    processes = [
        context.Process(target=target, args=(dsns[arm], jobs_by_arm[arm], seconds, start_at, queues[arm]))
        for arm in jobs_by_arm
        for _ in range(clients)
    ]
    for process in processes:
        process.start()
    results = {arm: [queue.get(timeout=seconds + 300) for _ in range(clients)] for arm, queue in queues.items()}
    for process in processes:
        process.join(30)
    figures = {}
    for arm, rows in results.items():
        failures = [r for r in rows if isinstance(r, Exception)]
        if failures:
            raise RuntimeError(f"arm {arm}: {len(failures)} client(s) failed; the first: {failures[0]!r}")
        latencies = [lat for r in rows for lat in r[1]]
        figures[arm] = {
            "per_s": sum(r[0] for r in rows) / seconds,
            "p50_ms": percentile(latencies, 0.50) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000,
            "max_s": max(latencies),
        }
    return figures


def at_revision(revision: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{revision}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="HEAD", help="git revision whose statements arm A runs")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=6.0, help="per measure and round")
    parser.add_argument("--clients", type=int, default=2, help="processes per arm")
    parser.add_argument("--items", type=int, default=50_000, help="items per epoch of each round's job")
    parser.add_argument("--trigger-in-both", action="store_true", help="A keeps the trigger: the statements alone")
    parser.add_argument(
        "--analyze", action="store_true", help="ANALYZE the copies first (else the jobs are new to the statistics)"
    )
    args = parser.parse_args()

    import django

    django.setup()
    import psycopg
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    from server import sql
    from server.services import jobs
    from server.services.leases import TAIL_WINDOW

    names = ("take", "extend", "materialise_epoch")
    statements = {
        "A": {name: at_revision(args.baseline, f"server/sql/{name}.sql") for name in names},
        "B": {name: sql.statement(name) for name in names},
    }
    trigger = __import__("migrations.0010_item_moves_counted_by_trigger", fromlist=["UNINSTALL"])
    call_command("migrate", verbosity=0, interactive=False)
    job_ids = []
    for _ in range(args.rounds):
        spec = jobs.JobSpec(
            name=f"trigger-ab-{uuid.uuid4().hex[:8]}",
            works=[f"/bench/{i:07d}" for i in range(args.items)],
            lease_timeout=300.0,
            num_epochs=2,
        )
        job_ids.append(jobs.create_or_attach(spec)[0].id)
    connections.close_all()

    db = settings.DATABASES["default"]
    conninfo = {
        "user": db["USER"],
        "host": db["HOST"],
        "port": db["PORT"] or None,
        "password": db["PASSWORD"] or None,
    }
    base = " ".join(f"{k}={v}" for k, v in conninfo.items() if v)
    dsns = {arm: f"{base} dbname={db['NAME']}_{arm.lower()}" for arm in ("A", "B")}
    with psycopg.connect(f"{base} dbname=postgres", autocommit=True) as admin:
        for arm in ("A", "B"):
            admin.execute(f"DROP DATABASE IF EXISTS {db['NAME']}_{arm.lower()}")
            admin.execute(f"CREATE DATABASE {db['NAME']}_{arm.lower()} TEMPLATE {db['NAME']}")
    for arm in ("A", "B"):
        with psycopg.connect(dsns[arm], autocommit=True) as conn:
            if arm == "A" and not args.trigger_in_both:
                conn.execute(trigger.UNINSTALL)
            if args.analyze:
                conn.execute("ANALYZE")

    rounds = []
    for job_id in job_ids:
        arms = {arm: {"id": job_id, "tail_window": TAIL_WINDOW, **statements[arm]} for arm in ("A", "B")}
        materialise = run_both(materialise_client, arms, dsns, 1, 1.0)
        take = run_both(dispatch.raw_sql_client, arms, dsns, args.clients, args.seconds)
        beat = run_both(heartbeat_client, arms, dsns, args.clients, args.seconds)
        rounds.append({"take": take, "beat": beat, "materialise": materialise})
        print(
            f"round {len(rounds)}: take A {take['A']['per_s']:.0f} B {take['B']['per_s']:.0f} items/s, "
            f"heartbeat A {beat['A']['per_s']:.0f} B {beat['B']['per_s']:.0f}/s, "
            f"materialise A {materialise['A']['max_s']:.2f} B {materialise['B']['max_s']:.2f} s",
            flush=True,
        )

    measures = {
        "take items/s": ("take", "per_s"),
        "take p50 ms": ("take", "p50_ms"),
        "take p99 ms": ("take", "p99_ms"),
        "heartbeats/s": ("beat", "per_s"),
        "heartbeat p50 ms": ("beat", "p50_ms"),
        "materialise s": ("materialise", "max_s"),
    }
    print(
        f"\n{args.rounds} rounds, {args.clients} clients per arm at once, {args.seconds:.0f} s per measure, "
        f"{args.items} items per epoch, {os.cpu_count()} CPUs; A = {args.baseline}"
        f"{' with' if args.trigger_in_both else ' without'} the trigger, B = working tree with it; "
        f"{'analysed' if args.analyze else 'jobs new to the statistics'}"
    )
    print(f"{'measure':<18}{'A median':>10}{'B median':>10}{'median B/A':>12}")
    for label, (phase, key) in measures.items():
        a = statistics.median(r[phase]["A"][key] for r in rounds)
        b = statistics.median(r[phase]["B"][key] for r in rounds)
        ratio = statistics.median(r[phase]["B"][key] / r[phase]["A"][key] for r in rounds)
        print(f"{label:<18}{a:>10.2f}{b:>10.2f}{ratio:>12.2f}")


if __name__ == "__main__":
    main()
