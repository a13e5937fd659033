"""Signals at the tail of a job, through the real ASGI server: how soon waiting workers hear of the end, and what they cost while they wait.

Usage:  .venv/bin/python bench/tail_signals.py [--waiters 8,32] [--rounds 5] [--via complete,take]
            [--idle 0,50,200] [--idle-seconds 20] [--idle-processes 50] [--settle 12] [--json FILE]

Runs the server as tests/support.py does (gunicorn, uvicorn workers, the
gateway of server/gateway.py, 4 web processes), with PROMETHEUS_MULTIPROC_DIR
set so that /metrics adds up over the web processes.

(a) End of job. W waiter *processes* (--waiters), each with its own worker
    name and its own worker_sdk Client/Transport (a kept-alive connection),
    take with ``wait=20`` (as the SDK does) on a job whose one item a holder
    (this process) holds. Once /metrics says that all W takes wait on the
    server, the holder completes the item: with POST /leases/{id}/complete/
    ("complete"), or with a take that carries the completion, as the SDK's
    items() loop does at the end ("take"); rounds alternate between the two
    (--via). Each waiter's latency is the wall-clock moment its take returned
    (exhausted) minus the moment right before the holder sent the completion
    ("from send"), and minus the moment right after its answer came back
    ("from answer"). p50 / p99 / max over the waiters of all rounds.
    Target: p99 within 100 ms of the last completion.

(b) Idle load. A job of 2 items held by 2 SDK holder processes
    (``WorkQueue.items()``, which heartbeat as the SDK does: every third of
    the lease timeout); then N waiting takes (--idle: 0, then more), raw HTTP
    POSTs to /api/v1/jobs/{id}/leases/ with {"worker": name, "wait": 20} and
    an Idempotency-Key, on threads (--idle-processes per process), each thread
    its own worker name, asking again as soon as an answer comes. For each N,
    from --settle seconds after its first takes (pg_stat_database hears of an
    idle backend's transactions up to 10 s late), over --idle-seconds (make it
    a multiple of 20, the wait: every waiter asks again once per wait): transactions the database committed per second
    (pg_stat_database.xact_commit of the bench's database), statements per
    second from pg_stat_statements when it is loaded, takes answered to the
    waiters per second, and take executions per second on the server
    (shardline_lease_operations_total{op="take"}: a woken or timed-out wait
    runs the take again inside the server). Target: O(1) statements a second
    from the waiting workers, not O(workers).

Uses DATABASE_URL when set, else the embedded Postgres.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import re
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

from _env import percentile, prepare  # first: it sets up the project

WAIT = 20.0


# -- /metrics ------------------------------------------------------------------------


METRICS_ERRORS: list[str] = []


def metric(url: str, name: str, labels: str = "") -> float:
    """The sum of a /metrics sample ``name`` (with ``labels`` in its label set, e.g. 'op="take"')."""
    import requests

    for _attempt in range(5):
        response = requests.get(f"{url}/metrics", timeout=30)
        if response.status_code == 200:
            break
        METRICS_ERRORS.append(f"HTTP {response.status_code}: {response.text[:200]}")
        time.sleep(0.1)
    text = response.text
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{re.escape(name)}(\{{[^}}]*\}})? ([0-9.e+-]+)$", line)
        if match and (not labels or labels in (match.group(1) or "")):
            total += float(match.group(2))
    return total


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


# -- (a) end of job ---------------------------------------------------------------------


def end_waiter(index, url, key, names, jobs, out):
    """Per round: a job id arrives; each of ``names`` (a thread each) takes with wait=20 until the job is exhausted."""
    from worker_sdk.client import Client
    from worker_sdk.protocol import TakeRequest
    from worker_sdk.transport import Transport

    clients = {name: Client(Transport(url, key, retry_seconds=30)) for name in names}
    for client in clients.values():
        client.transport.request("GET", "/healthz")  # a kept-alive connection before the first round
    out.put(("ready", index, None))

    def wait_for_end(name, job):
        takes, answer = 0, None
        while True:
            answer = clients[name].take(job, TakeRequest(name, wait=WAIT))
            takes += 1
            if answer.exhausted or answer.leases:
                break
        out.put(("returned", name, (time.time(), answer.exhausted, takes)))

    while True:
        job = jobs.get()
        if job is None:
            return
        threads = [threading.Thread(target=wait_for_end, args=(name, job)) for name in names]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def end_of_job(url, key, waiters: int, rounds: int, vias: list[str], processes_: int) -> dict:
    from worker_sdk.client import Client
    from worker_sdk.protocol import Completion, TakeRequest
    from worker_sdk.transport import Transport

    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    count = min(processes_, waiters) if processes_ else waiters
    names = [[f"waiter-{w}" for w in range(waiters) if w % count == i] for i in range(count)]
    pipes = [context.Queue() for _ in range(count)]
    processes = [
        context.Process(target=end_waiter, args=(i, url, key, names[i], pipes[i], out), daemon=True)
        for i in range(count)
    ]
    for process in processes:
        process.start()
    holder = Client(Transport(url, key, retry_seconds=30))
    samples: dict[str, dict[str, list[float]]] = {via: {"send": [], "answer": [], "retakes": []} for via in vias}
    try:
        for _ in processes:
            kind, _index, _value = out.get(timeout=300)
            assert kind == "ready"
        for round_ in range(rounds):
            via = vias[round_ % len(vias)]
            job = holder.create_job({"name": f"signals-{uuid.uuid4().hex[:8]}", "works": ["/w/0"]})["id"]
            (held,) = holder.take(job, TakeRequest("holder")).leases
            before = metric(url, "shardline_waiting_takes")
            for pipe in pipes:
                pipe.put(job)
            wait_for(lambda: metric(url, "shardline_waiting_takes") >= before + waiters, 60, f"{waiters} waiting takes")
            time.sleep(0.3)  # settled in their waits
            sent = time.time()
            if via == "complete":
                holder.complete(held.id, held.token)
            else:
                answer = holder.take(job, TakeRequest("holder", complete=(Completion(held.id, held.token),)))
                assert answer.completed == (held.id,) and answer.exhausted, answer
            answered = time.time()
            for _ in range(waiters):
                kind, _index, (returned, exhausted, takes) = out.get(timeout=WAIT + 30)
                assert kind == "returned" and exhausted, "a waiter did not learn of the end"
                samples[via]["send"].append(returned - sent)
                samples[via]["answer"].append(returned - answered)
                samples[via]["retakes"].append(takes - 1)
    finally:
        for pipe in pipes:
            pipe.put(None)
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
        holder.close()
    return samples


# -- (b) idle load ------------------------------------------------------------------------


def idle_waiters(url, key, job, names, stop, out):
    """One thread per name: waiting takes (raw HTTP, keyed) until ``stop`` or the job's end; reports answer times."""
    parsed = urlparse(url)
    answered: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def loop(name):
        connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=WAIT + 30)
        body = json.dumps({"worker": name, "wait": WAIT})
        while not stop.is_set():
            headers = {
                "Authorization": f"Token {key}",
                "Content-Type": "application/json",
                "Idempotency-Key": uuid.uuid4().hex,
            }
            try:
                connection.request("POST", f"/api/v1/jobs/{job}/leases/", body, headers)
                response = connection.getresponse()
                answer = json.loads(response.read())
            except (OSError, http.client.HTTPException, ValueError) as exc:
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                connection.close()
                time.sleep(0.5)
                continue
            with lock:
                answered.append(time.time())
            if response.status != 200 or answer.get("exhausted") or answer.get("leases"):
                if response.status != 200:
                    with lock:
                        errors.append(f"HTTP {response.status}: {answer}")
                return
            time.sleep(answer.get("retry_after") or 0.0)  # 0 once a wait is used up, as the SDK would

    threads = [threading.Thread(target=loop, args=(name,), daemon=True) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.put((answered, errors[:5], len(errors)))


def idle_holder(index, url, key, name, works, jobs, release):
    """An SDK worker that takes one item and holds it (heartbeating as the SDK does) until ``release``."""
    from worker_sdk import WorkQueue

    queue = WorkQueue(works, shuffle=False, name=name, url=url, token=key, worker=f"holder-{index}")
    for _item in queue.items():
        jobs.put(queue.job["id"])
        release.wait(600)
    queue.close()


def database_counts(database: str) -> tuple[int, int | None]:
    """(xact_commit of ``database``, pg_stat_statements calls in it or None when not loaded)."""
    import psycopg
    from django.conf import settings
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [database])
        commits = cursor.fetchone()[0]
    calls = None
    db = settings.DATABASES["default"]
    try:
        with psycopg.connect(
            dbname=db["NAME"],
            user=db.get("USER") or None,
            password=db.get("PASSWORD") or None,
            host=db.get("HOST") or None,
            port=db.get("PORT") or None,
            autocommit=True,
        ) as other:
            calls = other.execute(
                "SELECT sum(calls)::bigint FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database"
                " WHERE datname = current_database())"
            ).fetchone()[0]
    except Exception:
        calls = None
    return commits, calls


def idle_load(
    url, key, database: str, levels: list[int], seconds: float, per_process: int, settle: float
) -> list[dict]:
    context = multiprocessing.get_context("spawn")
    release, stop = context.Event(), context.Event()
    jobs, out = context.Queue(), context.Queue()
    name = f"idle-{uuid.uuid4().hex[:8]}"
    works = ["/w/0", "/w/1"]
    holders = [
        context.Process(target=idle_holder, args=(i, url, key, name, works, jobs, release), daemon=True)
        for i in range(2)
    ]
    for process in holders:
        process.start()
    job = jobs.get(timeout=120)
    assert jobs.get(timeout=120) == job, "the holders attached to different jobs"
    waiters: list = []
    started = 0
    rows = []
    try:
        for level in levels:
            new = level - started
            if new < 0:
                raise ValueError("--idle levels must not decrease")
            before = metric(url, "shardline_waiting_takes")
            for first in range(started, level, per_process):
                names = [f"idle-waiter-{i}" for i in range(first, min(level, first + per_process))]
                process = context.Process(target=idle_waiters, args=(url, key, job, names, stop, out), daemon=True)
                process.start()
                waiters.append(process)
            started = level
            if new:
                wait_for(lambda: metric(url, "shardline_waiting_takes") >= before + new, 120, f"{level} waiting takes")
            # Past the first burst of takes, and past the statistics' flush lag: a backend that goes idle
            # reports its transactions to pg_stat_database up to 10 s later (PGSTAT_IDLE_INTERVAL), so a
            # window that starts sooner counts the burst of first takes that came before it.
            time.sleep(settle)
            takes0 = metric(url, "shardline_lease_operations_total", 'op="take"')
            waiting0 = metric(url, "shardline_waiting_takes")
            commits0, calls0 = database_counts(database)
            began = time.time()
            time.sleep(seconds)
            commits1, calls1 = database_counts(database)
            ended = time.time()
            takes1 = metric(url, "shardline_lease_operations_total", 'op="take"')
            waiting1 = metric(url, "shardline_waiting_takes")
            rows.append(
                {
                    "waiters": level,
                    "seconds": ended - began,
                    "began": began,
                    "ended": ended,
                    "commits_per_s": (commits1 - commits0) / (ended - began),
                    "statements_per_s": None
                    if calls0 is None or calls1 is None
                    else (calls1 - calls0) / (ended - began),
                    "server_takes_per_s": (takes1 - takes0) / (ended - began),
                    "waiting_takes": (waiting0, waiting1),
                }
            )
    finally:
        stop.set()
        release.set()  # the holders complete: the job ends, every waiting take returns exhausted
        answered, errors, error_count = [], [], 0
        for _ in waiters:
            try:
                times, some, count = out.get(timeout=WAIT + 30)
            except Exception:
                break
            answered += times
            errors += some
            error_count += count
        for process in waiters + holders:
            process.join(10)
            if process.is_alive():
                process.kill()
    for row in rows:
        row["answered_per_s"] = sum(1 for t in answered if row["began"] <= t < row["ended"]) / row["seconds"]
    if error_count:
        print(f"  waiter errors: {error_count}, e.g. {errors[:3]}")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--waiters", default="8,32", help="waiter processes at the end of a job, comma-separated")
    parser.add_argument(
        "--waiter-processes",
        type=int,
        default=0,
        help="processes the end-of-job waiters share, as threads (0: a process each)",
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--via", default="complete,take", help="how the holder completes: complete, take, or both")
    parser.add_argument("--idle", default="0,50,200", help="waiting takes for the idle load, increasing")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--idle-processes", type=int, default=50, help="waiting takes per process (threads)")
    parser.add_argument(
        "--settle", type=float, default=12.0, help="seconds from a level's first takes to its window (> 10: stats lag)"
    )
    parser.add_argument("--skip", default="", help="end, idle: parts to skip")
    parser.add_argument("--json", default=None)
    parser.add_argument("--server-log-level", default="WARNING")
    args = parser.parse_args()
    if "end" not in args.skip and args.rounds < len(args.via.split(",")):
        parser.error(f"--rounds {args.rounds}: rounds alternate between the ways in --via, so at least one each")

    key = prepare("tail signals bench")
    from django.conf import settings

    from tests.support import ServerProcess, database_url

    metrics_dir = tempfile.mkdtemp(prefix="shardline-metrics-")
    server = ServerProcess(
        database_url(settings.DATABASES["default"]),
        workers=4,
        extra_env={"PROMETHEUS_MULTIPROC_DIR": metrics_dir, "LOG_LEVEL": args.server_log_level},
    ).start()
    results: dict = {"end_of_job": {}, "idle_load": []}
    began = time.time()
    try:
        if "end" not in args.skip:
            vias = args.via.split(",")
            print(
                "(a) end of job: each waiting take's return, from the moment before the holder sent the last"
                " completion (and from the moment its answer came back)"
            )
            print(
                f"  {'waiters':>7} {'via':>8} {'n':>4}  {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}"
                f"   {'from answer: p50':>16} {'p99':>6} {'max':>6}  retakes"
            )
            for waiters in (int(w) for w in args.waiters.split(",")):
                samples = end_of_job(server.url, key, waiters, args.rounds, vias, args.waiter_processes)
                results["end_of_job"][waiters] = samples
                for via, got in samples.items():
                    send = [1000 * s for s in got["send"]]
                    answer = [1000 * s for s in got["answer"]]
                    print(
                        f"  {waiters:>7} {via:>8} {len(send):>4}  {percentile(send, 0.5):7.1f} {percentile(send, 0.99):7.1f}"
                        f" {max(send):7.1f}   {percentile(answer, 0.5):16.1f} {percentile(answer, 0.99):6.1f}"
                        f" {max(answer):6.1f}  {sum(got['retakes'])}",
                        flush=True,
                    )
            worst = max(
                percentile([1000 * s for s in got["send"]], 0.99)
                for samples in results["end_of_job"].values()
                for got in samples.values()
            )
            print(
                f"  target p99 <= 100 ms after the last completion: {'met' if worst <= 100 else 'NOT met'} "
                f"(worst p99 {worst:.1f} ms, from send)"
            )
        if "idle" not in args.skip:
            levels = [int(n) for n in args.idle.split(",")]
            print(
                f"(b) idle load: a job whose 2 items 2 SDK holders hold; N waiting takes (wait {WAIT:.0f} s);"
                f" rates over {args.idle_seconds:.0f} s"
            )
            rows = idle_load(
                server.url,
                key,
                settings.DATABASES["default"]["NAME"],
                levels,
                args.idle_seconds,
                args.idle_processes,
                args.settle,
            )
            results["idle_load"] = rows
            print(
                f"  {'waiters':>7} {'commits/s':>10} {'statements/s':>13} {'takes answered/s':>17}"
                f" {'takes run/s':>12} {'waiting (start, end)':>21}"
            )
            for row in rows:
                statements = "n/a" if row["statements_per_s"] is None else f"{row['statements_per_s']:.1f}"
                print(
                    f"  {row['waiters']:>7} {row['commits_per_s']:10.1f} {statements:>13} {row['answered_per_s']:17.1f}"
                    f" {row['server_takes_per_s']:12.1f} {str(tuple(int(w) for w in row['waiting_takes'])):>21}"
                )
            if rows and rows[0]["statements_per_s"] is None:
                print(
                    "  (statements/s: pg_stat_statements is not loaded on this server; commits = statements here,"
                    " each lease statement runs in autocommit)"
                )
            base = rows[0] if rows else None
            for row in rows[1:]:
                extra = row["commits_per_s"] - base["commits_per_s"]
                runs = row["server_takes_per_s"] - base["server_takes_per_s"]
                per_run = f", {extra / runs:.1f} per take run" if runs > 0 else ""
                print(
                    f"  {row['waiters']} waiters add {extra:.1f} commits/s ({extra / row['waiters']:.3f} per waiter a"
                    f" second{per_run}); target O(1): {'met' if extra < 5 else 'NOT met'}"
                )
    finally:
        server.stop()
    if METRICS_ERRORS:
        print(f"/metrics answered an error {len(METRICS_ERRORS)} times (retried), e.g. {METRICS_ERRORS[:2]}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    print(f"machine: {os.cpu_count()} CPUs; {time.time() - began:.0f} s")


if __name__ == "__main__":
    main()
