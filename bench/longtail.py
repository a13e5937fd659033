"""The long tail: static sharding vs Shardline vs the ideal, through the real stack.

Usage:  .venv/bin/python bench/longtail.py [--workers 8] [--ideal-seconds 6] [--factors 1,4,10] [--chart bench/longtail.png]

K worker processes each lease items through the HTTP API with the SDK
(`WorkQueue.items()`) and "process" an item by sleeping cost / speed. For each
scenario and for num_slices = 1x, 4x and 10x the workers (--factors):

  static   each worker reads its 1/K of the items (Dataset.shard: items i, i+K, ...);
           its busy time is computed from the same costs and speeds, with no
           dispatch overhead at all (the most favourable case for static)
  dynamic  measured: the K processes share one Shardline job, each taking
           the next item when it is ready; makespan = last completion - start
  ideal    total work / total speed
  bound    whole items handed out in order to whichever worker is free
           first, with zero overhead (computed): the best dynamic dispatch can
           do with items of this size; the gap to the ideal is granularity

Costs are scaled so that the ideal makespan is --ideal-seconds in every run.
Prints each makespan and its ratio to the ideal, and draws per-worker busy
time (static vs dynamic) for the 10x equal-cost run into --chart (PNG, needs
matplotlib). Uses DATABASE_URL when set, else the embedded Postgres.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import sys
import time
import uuid
from pathlib import Path

from _env import ROOT  # first: it sets up the project


def worker(index, url, key, name, items, speed, start_at, out):
    from worker_sdk import WorkQueue

    queue = WorkQueue(items, shuffle=False, name=name, url=url, token=key, worker=f"w{index}")
    queue.job  # attach before the start, so the run measures dispatch, not set-up
    time.sleep(max(0.0, start_at - time.time()))
    spans = []
    for item in queue.items():
        began = time.time()
        time.sleep(float(item.rsplit(":", 1)[1]) / speed)
        spans.append((began, time.time()))
    out.put((index, spans))


def scenario_costs(kind: str, count: int, rng: random.Random) -> list[float]:
    if kind == "long-tailed":
        # Lognormal item costs: most items small, a few ten times the median.
        return [rng.lognormvariate(0, 1.0) for _ in range(count)]
    return [1.0] * count


def greedy(costs: list[float], speeds: list[float]) -> float:
    """Makespan of dispatching whole items in order to whichever worker is free
    first, with no overhead at all: what dynamic dispatch can reach at best
    with items of this size (the ideal assumes items can be cut finely)."""
    free = [0.0] * len(speeds)
    for cost in costs:
        worker = min(range(len(speeds)), key=lambda w: free[w])
        free[worker] += cost / speeds[worker]
    return max(free)


def run_dynamic(url, key, items, speeds, run_id):
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    start_at = time.time() + 3.0
    name = f"longtail-{run_id}"
    processes = [
        context.Process(target=worker, args=(i, url, key, name, items, speeds[i], start_at, out))
        for i in range(len(speeds))
    ]
    for process in processes:
        process.start()
    results = dict(out.get(timeout=600) for _ in processes)
    for process in processes:
        process.join(30)
    ends = [end for spans in results.values() for _begin, end in spans]
    busy = [sum(end - begin for begin, end in results[i]) for i in range(len(speeds))]
    counts = [len(results[i]) for i in range(len(speeds))]
    return max(ends) - start_at, busy, counts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--ideal-seconds", type=float, default=6.0)
    parser.add_argument("--chart", default=str(ROOT / "bench" / "longtail.png"))
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--factors", default="1,4,10", help="slices per worker to run, comma-separated (the chart is of the largest)"
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from server.services import accounts
    from tests.support import ServerProcess, database_url

    call_command("migrate", verbosity=0, interactive=False)
    user, _ = accounts.ensure_user("bench", "worker")
    _token, key = accounts.create_token(user, "worker", name="longtail bench")
    server = ServerProcess(database_url(settings.DATABASES["default"]), workers=4).start()

    k = args.workers
    factors = [int(f) for f in args.factors.split(",")]
    rng = random.Random(2026)
    random_speeds = [round(rng.uniform(0.25, 1.0), 2) for _ in range(k)]
    scenarios = [
        ("equal costs, one worker 4x slower", "equal", [0.25] + [1.0] * (k - 1)),
        ("long-tailed costs, one worker 4x slower", "long-tailed", [0.25] + [1.0] * (k - 1)),
        ("equal costs, random speeds", "equal", random_speeds),
    ]
    rows, chart_data = [], None
    try:
        for label, kind, speeds in scenarios:
            for factor in factors:
                count = k * factor
                raw = scenario_costs(kind, count, random.Random(factor))
                scale = args.ideal_seconds * sum(speeds) / sum(raw)
                costs = [c * scale for c in raw]
                items = [f"item-{i:05d}:{c:.5f}" for i, c in enumerate(costs)]
                ideal = sum(costs) / sum(speeds)
                static_busy = [sum(costs[i::k]) / speeds[i] for i in range(k)]
                static = max(static_busy)
                bound = greedy(costs, speeds)
                dynamic, busy, counts = run_dynamic(server.url, key, items, speeds, uuid.uuid4().hex[:8])
                row = {
                    "scenario": label,
                    "slices": f"{factor}x ({count})",
                    "ideal": ideal,
                    "static": static,
                    "dynamic": dynamic,
                    "static_ratio": static / ideal,
                    "dynamic_ratio": dynamic / ideal,
                    "whole_items": bound,
                    "whole_items_ratio": bound / ideal,
                    "items_per_worker": counts,
                    "speeds": speeds,
                }
                rows.append(row)
                print(
                    f"{label:<42} {row['slices']:>10}  ideal {ideal:5.2f}s  static {static:6.2f}s ({static / ideal:4.2f}x)"
                    f"  whole-item bound {bound:5.2f}s ({bound / ideal:4.2f}x)"
                    f"  dynamic {dynamic:5.2f}s ({dynamic / ideal:4.2f}x)  items per worker {counts}",
                    flush=True,
                )
                if kind == "equal" and factor == max(factors) and chart_data is None:
                    chart_data = (label, factor, static_busy, busy, ideal, static, dynamic)
    finally:
        server.stop()

    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    if chart_data:
        draw(chart_data, args.chart)
        print(f"chart: {args.chart}")
    print(f"machine: {os.cpu_count()} CPUs; {k} worker processes; Python {sys.version.split()[0]}")


def draw(data, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart (pip install matplotlib)")
        return
    label, factor, static_busy, dynamic_busy, ideal, static, dynamic = data
    workers = range(len(static_busy))
    fig, ax = plt.subplots(figsize=(8, 4), dpi=110)
    width = 0.4
    ax.bar([w - width / 2 for w in workers], static_busy, width, label="static sharding (busy s)", color="#c2352b")
    ax.bar([w + width / 2 for w in workers], dynamic_busy, width, label="Shardline (busy s)", color="#2e7d4f")
    ax.axhline(ideal, color="#2457c5", linestyle="--", label=f"ideal makespan {ideal:.1f}s")
    ax.set_xticks(list(workers), [f"w{w}" + (" (slow)" if w == 0 else "") for w in workers], fontsize=8)
    ax.set_ylabel("seconds")
    ax.set_title(f"{label}, {factor}x slices: makespan static {static:.1f}s, Shardline {dynamic:.1f}s")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    main()
