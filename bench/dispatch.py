"""Dispatch throughput: take+complete through HTTP beside a raw-SQL loop of the same statements.

Usage:  .venv/bin/python bench/dispatch.py [--clients 4] [--seconds 8] [--web-workers 4] [--warm-up 2]

Runs, in one process tree and one run so the ratios compare like with like:
  raw-sql       C processes, each a psycopg connection running take.sql, prepared
                as the server runs it, with the previous lease's completion
                (what one HTTP request runs)
  http-single   C processes, each POSTing /leases/ with count=1 and the previous
                lease's completion piggybacked (one round trip per item), over
                a kept-alive http.client connection
  http-keyed    http-single with an Idempotency-Key per take, as the SDK sends
  http-batch32  the same with count=32 (keyed)
  http-half     http-keyed paced at half of its measured peak, for latency
Prints items/s, p50/p99 latency per round trip, and the ratios the targets
name. Before the arms, --warm-up seconds of untimed keyed takes (2 per web
process) reach every web process's slow first requests. Uses DATABASE_URL
when set, else the embedded Postgres.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
import uuid

from _env import percentile, prepare  # first: it sets up the project

# --- client processes ------------------------------------------------------


def raw_sql_client(dsn: str, job: dict, seconds: float, start_at: float, out):
    try:
        _raw_sql_loop(dsn, job, seconds, start_at, out)
    except Exception as exc:
        out.put(exc)
        raise


def _raw_sql_loop(dsn: str, job: dict, seconds: float, start_at: float, out):
    import psycopg

    from server import sql

    # job["take"]: another version of take.sql's text (bench/trigger_ab.py).
    text, names = sql.number(job["take"]) if "take" in job else sql.numbered("take")
    latencies, items = [], 0
    held = []
    # Autocommit, the one statement the server runs for a take that carries
    # the previous lease's completion, prepared and executed as the server
    # does (server/sql/__init__.py: PREPARE once, then EXECUTE with the values
    # bound on the client, as Django binds them).
    with psycopg.connect(dsn, cursor_factory=psycopg.ClientCursor, autocommit=True) as conn:
        conn.execute(f"PREPARE shardline_take AS {text}")
        execute = f"EXECUTE shardline_take ({', '.join(['%s'] * len(names))})"
        time.sleep(max(0, start_at - time.time()))
        deadline = time.time() + seconds
        worker = f"raw-{os.getpid()}"
        while time.time() < deadline:
            began = time.perf_counter()
            with conn.cursor() as cur:
                params = take_params(job, worker, 1, held)
                cur.execute(execute, [params[key] for key in names])
                rows = cur.fetchall()
                column = columns(cur)
                completed = rows[0][column["completed"]]
                held = leased(rows, column)
            items += len(completed)
            latencies.append(time.perf_counter() - began)
    out.put((items, latencies))


def take_params(job: dict, worker: str, count: int, held: list[tuple[int, int]]) -> dict:
    """take.sql's parameters as the service binds them for a plain take (unkeyed) carrying ``held``'s completions."""
    return {
        "job": job["id"],
        "worker": worker,
        "consumer": worker,
        "count": count,
        "tail_window": job["tail_window"],
        "ids": [h[0] for h in held],
        "tokens": [h[1] for h in held],
        "records": [None] * len(held),
        "key": None,  # unkeyed, as the raw baseline
        "ttl": 600,
        "tracks": False,
        "upto": None,
        "from": None,
        "sync": False,
        "holder": None,  # the server itself (server/callers.py)
        "scope": None,
        "ahead": False,  # a take for the item the loop asks for now
        "started": [],  # no lease taken ahead to mark started
        "leave": False,  # a take that waits when it finds nothing
    }


def columns(cursor) -> dict[str, int]:
    """take.sql's result columns by name: the statement gains columns, so none is read by position."""
    return {c.name: i for i, c in enumerate(cursor.description)}


def leased(rows, column: dict[str, int]) -> list[tuple[int, int]]:
    """The (id, token) of each lease in take.sql's result (``column``: ``columns(cursor)``)."""
    return [(row[column["id"]], row[column["token"]]) for row in rows if row[column["id"]] is not None]


def http_client(
    base: str, key: str, job_id: int, count: int, keyed: bool, seconds: float, start_at: float, pace: float | None, out
):
    # A lean load generator (http.client, one kept-alive connection): it
    # shares the 2 CPUs with the server, so its own cost would count against
    # the server's rate. The SDK's requests-based transport costs more per call.
    import http.client
    import json
    from urllib.parse import urlsplit

    try:
        target = urlsplit(base)
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
        headers = {"Authorization": f"Token {key}", "Content-Type": "application/json"}
        path = f"/api/v1/jobs/{job_id}/leases/"
        latencies, items, held = [], 0, []
        name = f"http-{os.getpid()}"
        time.sleep(max(0, start_at - time.time()))
        deadline = time.time() + seconds
        next_at = time.perf_counter()
        while time.time() < deadline:
            if pace:
                # Paced (open loop): requests leave on a schedule, so a slow
                # response does not lower the offered load.
                next_at += pace
                delay = next_at - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            began = time.perf_counter()
            # As the SDK sends a take: with an Idempotency-Key (one per take).
            sent = {**headers, "Idempotency-Key": uuid.uuid4().hex} if keyed else headers
            connection.request("POST", path, json.dumps({"worker": name, "count": count, "complete": held}), sent)
            response = connection.getresponse()
            payload = response.read()
            latencies.append(time.perf_counter() - began)
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}: {payload[:300]!r}")
            body = json.loads(payload)
            items += len(body["completed"])
            held = [{"id": lease["id"], "token": lease["token"]} for lease in body["leases"]]
        out.put((items, latencies))
    except Exception as exc:  # report, so the run stops instead of waiting for a result
        out.put(exc)
        raise


def run_arm(target, args_for_client, clients, seconds):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    start_at = time.time() + 2.0
    processes = [
        context.Process(target=target, args=(*args_for_client(i), seconds, start_at, *extra, queue))
        for i, extra in clients
    ]
    for process in processes:
        process.start()
    results = [queue.get(timeout=seconds + 120) for _ in processes]
    for process in processes:
        process.join(30)
    failures = [r for r in results if isinstance(r, Exception)]
    if failures:
        raise RuntimeError(f"{len(failures)} client(s) failed; the first: {failures[0]!r}")
    items = sum(r[0] for r in results)
    latencies = [lat for r in results for lat in r[1]]
    return {
        "items_per_s": items / seconds,
        "requests": len(latencies),
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "mean_ms": statistics.fmean(latencies) * 1000 if latencies else float("nan"),
    }


# --- orchestration ---------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument("--items", type=int, default=200_000, help="items per job (each arm has its own job)")
    parser.add_argument("--warm-up", type=float, default=2.0, help="seconds of untimed HTTP takes before the arms")
    parser.add_argument(
        "--serve", choices=("asgi", "wsgi"), default="asgi", help="gunicorn with uvicorn workers (asgi) or sync ones"
    )
    args = parser.parse_args()

    key = prepare("bench")
    from django.conf import settings

    from server.services import jobs
    from server.services.leases import TAIL_WINDOW
    from tests.support import ServerProcess, database_url

    db = settings.DATABASES["default"]
    dsn_url = database_url(db)
    conninfo = {
        "dbname": db["NAME"],
        "user": db["USER"],
        "host": db["HOST"],
        "port": db["PORT"] or None,
        "password": db["PASSWORD"] or None,
    }
    dsn = " ".join(f"{k}={v}" for k, v in conninfo.items() if v)

    def new_job(tag):
        spec = jobs.JobSpec(
            name=f"bench-{tag}-{uuid.uuid4().hex[:6]}",
            works=[f"/bench/{i:07d}" for i in range(args.items)],
            lease_timeout=300.0,
        )
        job, _ = jobs.create_or_attach(spec)
        # The raw-SQL clients run take.sql with the service's parameters
        # (they are spawned without Django, so they get them from here).
        return {"id": job.id, "tail_window": TAIL_WINDOW}

    server = ServerProcess(
        dsn_url, workers=args.web_workers, extra_env={"DATABASE_CONN_MAX_AGE": "600"}, asgi=args.serve == "asgi"
    ).start()
    results = {}
    try:
        if args.warm_up > 0:
            # Untimed, on a job of its own: each web process's first requests
            # (imports, the first statements' plans) take a second or more,
            # which the first timed HTTP arm would otherwise pay alone.
            job = new_job("warm-up")
            warm = [(i, (None,)) for i in range(2 * args.web_workers)]
            run_arm(http_client, lambda i: (server.url, key, job["id"], 1, True), warm, args.warm_up)
        clients = [(i, ()) for i in range(args.clients)]
        job = new_job("raw")
        results["raw-sql"] = run_arm(raw_sql_client, lambda i: (dsn, job), clients, args.seconds)
        job = new_job("single")
        results["http-single"] = run_arm(
            http_client,
            lambda i: (server.url, key, job["id"], 1, False),
            [(i, (None,)) for i in range(args.clients)],
            args.seconds,
        )
        job = new_job("keyed")
        results["http-keyed"] = run_arm(
            http_client,
            lambda i: (server.url, key, job["id"], 1, True),
            [(i, (None,)) for i in range(args.clients)],
            args.seconds,
        )
        job = new_job("batch")
        results["http-batch32"] = run_arm(
            http_client,
            lambda i: (server.url, key, job["id"], 32, True),
            [(i, (None,)) for i in range(args.clients)],
            args.seconds,
        )
        half_rate = results["http-single"]["items_per_s"] / 2
        pace = args.clients / half_rate if half_rate > 0 else 0.1
        job = new_job("half")
        results["http-half"] = run_arm(
            http_client,
            lambda i: (server.url, key, job["id"], 1, True),
            [(i, (pace,)) for i in range(args.clients)],
            args.seconds,
        )
    finally:
        server.stop()

    cpu = os.cpu_count()
    print(
        f"\nDispatch benchmark: {args.clients} client processes, {args.web_workers} gunicorn workers, {cpu} CPUs, {args.seconds:.0f} s per arm, Postgres {'embedded' if settings.DATABASE_IS_EMBEDDED else 'DATABASE_URL'}"
    )
    print(f"{'arm':<14}{'items/s':>10}{'round trips':>13}{'p50 ms':>9}{'p99 ms':>9}")
    for arm, row in results.items():
        print(f"{arm:<14}{row['items_per_s']:>10.0f}{row['requests']:>13}{row['p50_ms']:>9.2f}{row['p99_ms']:>9.2f}")
    raw, single, batch, half = (results[k] for k in ("raw-sql", "http-single", "http-batch32", "http-half"))
    print()
    print(f"HTTP single / raw SQL         {ratio(single, raw)}   (target >= 0.40)")
    print(f"HTTP batch32 / HTTP single    {ratio(batch, single)}   (target >= 5)")
    print(f"HTTP keyed / HTTP single      {ratio(results['http-keyed'], single)}   (the cost of idempotent takes)")
    print(
        f"p99 at half load              {half['p99_ms']:.2f} ms at {half['items_per_s']:.0f} items/s   (target < 20 ms)"
    )


def ratio(arm: dict, base: dict) -> str:
    """arm's items/s over base's; "n/a" when base leased nothing (a run too short for its first requests)."""
    return f"{arm['items_per_s'] / base['items_per_s']:.2f}" if base["items_per_s"] else "n/a"


if __name__ == "__main__":
    main()
