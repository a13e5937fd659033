"""A worker SIGKILLed mid-item: how long its item waits, with held heartbeats (ASGI), without (WSGI), and in tf.data service.

Usage:  .venv/bin/python bench/dead_worker.py [--workers 8] [--items 96] [--cost 0.5]
            [--lease-timeout 30] [--kill-at 2] [--rounds 2] [--no-tfdata]

Starts two servers side by side on one database, each with 4 gunicorn
workers: `asgi`, as `make run` serves (uvicorn workers over server.asgi: it
holds heartbeats, and a dropped one gives the holder's leases back), and
`wsgi` (server.wsgi: nothing held, a dead holder's lease lasts its timeout).
Each round runs the same job on each, in turn: --workers SDK processes read
--items items of --cost seconds each (`for item in wq.items(): sleep`), and
worker 0 is SIGKILLed --kill-at seconds in, in the middle of an item.
Beside them, unless --no-tfdata, the same job through tf.data service with
dynamic sharding (bench/tfdata_service.py): one split per item, a tf.data
worker in each consumer process (the victim's dies with it), each consumer
sleeping --cost per item.

Prints per run the makespan against the ideal, the killed worker's item's
wait (kill to another worker starting it), the items read twice by live
workers or not at all (must be 0: exactly once), and apart from those the
items the killed worker had finished and not yet acknowledged when it died,
which another worker reads again (at least once: an item is acknowledged
after its work, with the worker's next take). The ideal: the work left when the kill
comes, spread over the workers left, plus the killed worker's partial item:
(items x cost - workers x kill_at + the killed item's time) / (workers - 1)
+ kill_at.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import signal
import statistics
import sys
import time
import uuid

from _env import prepare  # first: it sets up the project


def consumer(url: str, key: str, name: str, worker: str, items: int, cost: float, lease_timeout: float, start, out):
    from worker_sdk import WorkQueue

    queue = WorkQueue(
        [f"/items/{i:04d}" for i in range(items)],
        shuffle=False,
        name=name,
        worker=worker,
        lease_timeout=lease_timeout,
        url=url,
        token=key,
    )
    out.put(("ready", worker, None, None))
    start.wait()
    for item in queue.items():
        out.put(("start", worker, item, time.time()))
        time.sleep(cost)
        out.put(("done", worker, item, time.time()))
    out.put(("finished", worker, None, time.time()))


def run(url: str, key: str, args) -> dict:
    """One job on the Shardline server at ``url``, worker 0 SIGKILLed mid-item."""
    context = multiprocessing.get_context("spawn")
    out, start = context.Queue(), context.Event()
    name = f"dead-{uuid.uuid4().hex[:8]}"
    processes = [
        context.Process(
            target=consumer,
            args=(url, key, name, worker, args.items, args.cost, args.lease_timeout, start, out),
            daemon=True,
        )
        for worker in workers(args)
    ]
    return watch(processes, start, out, args)


def run_tfdata(args) -> dict:
    """The same job through tf.data service (dynamic sharding, a worker in each consumer), worker 0 SIGKILLed mid-item."""
    import tfdata_service

    context = multiprocessing.get_context("spawn")
    server, target, stop = tfdata_service.start_service(context, "colocated", 120)
    out, start = context.Queue(), context.Event()
    job_name = f"dead-{uuid.uuid4().hex[:8]}"
    processes = [
        context.Process(
            target=tfdata_service.item_consumer,
            args=(worker, target, job_name, args.items, args.cost, start, out),
            daemon=True,
        )
        for worker in workers(args)
    ]
    try:
        return watch(processes, start, out, args)
    finally:
        stop.set()
        server.join(10)
        if server.is_alive():
            server.kill()


def workers(args) -> list[str]:
    return [f"w{i}" for i in range(args.workers)]


def watch(processes, start, out, args) -> dict:
    """Starts ``processes`` together, kills the first mid-item --kill-at seconds in, and measures the run.

    Each process streams ("ready" | "start" | "done" | "finished", worker,
    item, time) to ``out``. The run ends when every other worker finished;
    an item the victim started and nobody finished is "not read".
    """
    for process in processes:
        process.start()
    for _ in processes:
        assert out.get(timeout=180)[0] == "ready"
    began = time.time()
    start.set()
    starts, dones, finished, in_hand = {}, [], set(), {}
    killed_item = killed_at = None
    victim = processes[0]
    try:
        while len(finished) < len(processes) - 1:
            kind, worker, item, at = out.get(timeout=args.lease_timeout + 120)
            if kind == "start":
                starts.setdefault(item, []).append((worker, at))
                in_hand[worker] = item
            elif kind == "done":
                dones.append((worker, item, at))
                in_hand.pop(worker, None)
            elif kind == "finished":
                finished.add(worker)
            if killed_at is None and time.time() - began >= args.kill_at and in_hand.get("w0"):
                os.kill(victim.pid, signal.SIGKILL)  # mid-item: it started one and has not finished it
                killed_at, killed_item = time.time(), in_hand["w0"]
    finally:
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
    makespan = max(at for _w, _i, at in dones) - began
    taken_over = [at for worker, at in starts.get(killed_item, []) if worker != "w0"]
    partial = killed_at - starts[killed_item][0][1]
    kill_at = killed_at - began
    ideal = (args.items * args.cost - args.workers * kill_at + partial) / (args.workers - 1) + kill_at
    counts = {}
    for worker, item, _at in dones:
        if worker != "w0":
            counts[item] = counts.get(item, 0) + 1
    twice = sum(1 for n in counts.values() if n > 1)
    victims = {item for worker, item, _at in dones if worker == "w0"}
    missing = args.items - len(set(counts) | victims)
    return {
        "makespan": makespan,
        "ideal": ideal,
        "ratio": makespan / ideal,
        "item_wait": (taken_over[0] - killed_at) if taken_over else float("nan"),
        "first": min(at for item_starts in starts.values() for _worker, at in item_starts) - began,
        "twice": twice,
        "missing": missing,
        "again": len(victims & set(counts)),
    }


def seconds(wait: float) -> str:
    return "never (lost)" if math.isnan(wait) else f"{wait:.2f} s"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--items", type=int, default=96)
    parser.add_argument("--cost", type=float, default=0.5)
    parser.add_argument("--lease-timeout", type=float, default=30.0)
    parser.add_argument("--kill-at", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-tfdata", action="store_true", help="leave tf.data service out")
    args = parser.parse_args()

    key = prepare("dead-worker bench")
    from django.conf import settings

    from tests.support import ServerProcess, database_url

    db = database_url(settings.DATABASES["default"])
    servers = {"asgi": ServerProcess(db, workers=4), "wsgi": ServerProcess(db, workers=4, asgi=False)}
    runs = {kind: lambda server=server: run(server.url, key, args) for kind, server in servers.items()}
    if not args.no_tfdata:
        runs["tf.data service"] = lambda: run_tfdata(args)
    results = {kind: [] for kind in runs}
    try:
        for server in servers.values():
            server.start()
        for round_ in range(args.rounds):
            order = list(runs) if round_ % 2 == 0 else list(reversed(runs))
            for kind in order:
                row = runs[kind]()
                results[kind].append(row)
                print(
                    f"round {round_ + 1} {kind}: makespan {row['makespan']:.2f} s, ideal {row['ideal']:.2f} s,"
                    f" ratio {row['ratio']:.2f}; killed item taken over after {seconds(row['item_wait'])};"
                    f" read twice by live workers {row['twice']}, not read {row['missing']},"
                    f" finished by the killed worker and read again {row['again']}; first item started {row['first']:.2f} s in",
                    flush=True,
                )
    finally:
        for server in servers.values():
            server.stop()
    print(
        f"\n{args.workers} workers, {args.items} items x {args.cost} s, {args.lease_timeout:.0f}-s leases,"
        f" worker 0 SIGKILLed {args.kill_at} s in; {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    print(
        "| dispatch | makespan / ideal (median) | killed item taken over after (median) | read twice by live workers"
        " | not read | finished by the killed worker, read again |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for kind, rows in results.items():
        print(
            f"| {kind} | {statistics.median(r['ratio'] for r in rows):.2f} |"
            f" {seconds(statistics.median(r['item_wait'] for r in rows))} |"
            f" {sum(r['twice'] for r in rows)} | {sum(r['missing'] for r in rows)} | {sum(r['again'] for r in rows)} |"
        )


if __name__ == "__main__":
    main()
