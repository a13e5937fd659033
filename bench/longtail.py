"""The long tail: static sharding vs Shardline vs the ideal, through the real stack, whole items and record ranges.

Usage:  .venv/bin/python bench/longtail.py [--parts ranges|items|items,ranges] [--workers 8]
            [--ideal-seconds 6] [--range-ideal-seconds 30] [--factors 1,4,10] [--records 4800]
            [--costs equal,lognormal] [--no-tfdata] [--chart bench/longtail.png] [--json FILE] [--timeline]

K worker processes share one Shardline job through the HTTP API (the ASGI
server of tests/support.py, 4 web processes) and "process" work by sleeping
cost / speed. All of them create or attach to their job first, then report
ready; the bench then fixes a common start time 0.5 s ahead.
makespan = the last piece of work processed - that start time. Costs are
scaled so that the ideal makespan (total cost / total speed) is
--ideal-seconds (whole items) or --range-ideal-seconds (record ranges) in
every run.

Record ranges run for 30 s by default, whole items for 6 s. What a run costs
that does not grow with it (the workers' first takes, about 0.1 s with eight
starting at once on two cores; the last records' answers) is 2-3% of a 6-s
run and 0.5% of a 30-s one; an epoch of a real job runs minutes to hours.
Both are in bench/RESULTS.md.

--parts says which of the two parts run: "ranges" (the default, about 16
minutes on the 2-core machine at 30 s, tf.data's runs and the slow
split-off runs included), "items" (the whole-item scenarios of the earlier
version of this bench, about 2.5 minutes), or both.

Part "items" (whole items, `WorkQueue.items()`), for num_slices = 1x, 4x and
10x the workers (--factors), in three scenarios (equal costs and one worker 4x
slower; lognormal item costs and one worker 4x slower; equal costs and random
speeds):

  static   each worker reads its 1/K of the items (Dataset.shard: items i, i+K, ...);
           its busy time is computed from the same costs and speeds, with no
           dispatch overhead at all (the most favourable case for static)
  dynamic  measured: the K processes share one job, each taking the next
           item when it is ready
  bound    whole items handed out in order to whichever worker is free
           first, with zero overhead (computed): the best dynamic dispatch can
           do with items of this size; the gap to the ideal is granularity

Part "ranges" (the liquid tail): one CSV file per cost scenario of --records
records, each line "record id,cost" (cost in seconds at speed 1.0), cut by the
bench into num_slices = 1x, 4x, 10x the workers' slices, given to the job as
explicit slices `path?start=S&end=E` (so no Celery slicing run is needed).
One worker is 4x slower (speed 0.25, the others 1.0). Each worker runs

    for work in queue.ranges():
        for record in work.records():
            time.sleep(cost / speed)

and sends back the ids of the records it read: every run checks that each
record was read exactly once. Cost scenarios: (a) equal per-record costs,
(b) lognormal per-record costs (random.lognormvariate(0, 1), seeded). For
each scenario and factor, side by side in one run:

  split on   the job with split_tail on (the product's default)
  split off  the same slices in a job with split_tail off: whole slices only
  tf.data    tf.data service with dynamic sharding (bench/tfdata_service.py,
             a tf.data worker in each consumer process), the same costs and
             speeds; skipped with a note if the module or TensorFlow fails
  bound      whole slices handed out in order to whichever worker is free
             first, with zero overhead (computed)

Also printed for each Shardline run: the splits the server made (split on)
and when the first and the last of them were made (s after the start), how
long before the end the first worker and the median worker read their last
record ("idle 1st/med"), and the
sleep overshoot (the workers' measured busy time over the nominal
cost / speed: time.sleep on a loaded 2-core machine oversleeps, and that is
in every makespan, not dispatch). --timeline prints the split events of each
split-on run. Product target: split on <= 1.05x ideal in every record-range
run. Draws per-worker busy time (static vs dynamic) of the 10x equal-cost
whole-item run into --chart (PNG, needs matplotlib). Uses DATABASE_URL when
set, else the embedded Postgres.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from queue import Empty

from _env import ROOT, prepare  # first: it sets up the project

TARGET = 1.05


# -- worker processes -------------------------------------------------------------


def _attach_and_wait(queue, index, ready, go, start_value) -> tuple[int, float]:
    """Creates or attaches to the job, says so, and sleeps until the common start; (job id, start)."""
    job = queue.job  # attach before the start, so the run measures dispatch, not set-up
    ready.put(index)
    go.wait(600)
    start = start_value.value
    time.sleep(max(0.0, start - time.time()))
    return job["id"], start


def item_worker(index, url, key, name, items, speed, ready, go, start_value, out):
    from worker_sdk import WorkQueue

    queue = WorkQueue(items, shuffle=False, name=name, url=url, token=key, worker=f"w{index}")
    _job, _start = _attach_and_wait(queue, index, ready, go, start_value)
    spans = []
    for item in queue.items():
        began = time.time()
        time.sleep(float(item.rsplit(":", 1)[1]) / speed)
        spans.append((began, time.time()))
    queue.close()
    out.put((index, spans))


def range_worker(index, url, key, works, name, speed, split_tail, ready, go, start_value, out):
    from worker_sdk import WorkQueue

    queue = WorkQueue(works, shuffle=False, name=name, url=url, token=key, worker=f"w{index}", split_tail=split_tail)
    job_id, start = _attach_and_wait(queue, index, ready, go, start_value)
    read, last, leases, busy, nominal, trace = [], start, 0, 0.0, 0.0, []
    for work in queue.ranges():
        leases += 1
        # (lease's arrival, its records as leased, the first and last record read, records read)
        trace.append([time.time() - start, work.start, work.end, None, None, 0])
        for line in work.records():
            if trace[-1][3] is None:
                trace[-1][3] = time.time() - start
            trace[-1][5] += 1
            record, cost = line.split(b",")
            began = time.time()
            time.sleep(float(cost) / speed)
            last = time.time()
            busy += last - began
            nominal += float(cost) / speed
            read.append(int(record))
            trace[-1][4] = last - start
    queue.close()
    out.put(
        {
            "index": index,
            "job": job_id,
            "read": read,
            "last": last,
            "leases": leases,
            "busy": busy,
            "nominal": nominal,
            "trace": trace,
        }
    )


def run_processes(target, args_for, count: int, daemon: bool = True) -> tuple[float, list]:
    """Starts ``count`` spawned processes of ``target``, starts them together once all are attached; (start, results).

    ``daemon=False`` for targets that start processes of their own (a DataLoader's loaders).
    """
    context = multiprocessing.get_context("spawn")
    ready, out, go = context.Queue(), context.Queue(), context.Event()
    start_value = context.Value("d", 0.0)
    processes = [
        context.Process(target=target, args=(*args_for(i), ready, go, start_value, out), daemon=daemon)
        for i in range(count)
    ]
    for process in processes:
        process.start()
    try:
        for _ in processes:
            ready.get(timeout=120)
        start_value.value = time.time() + 0.5
        go.set()
        results = []
        deadline = time.monotonic() + 600
        while len(results) < len(processes):
            try:
                results.append(out.get(timeout=1))
            except Empty:
                # A worker that failed never reports: said now, not when the run's time is up.
                failed = [(i, p.exitcode) for i, p in enumerate(processes) if p.exitcode not in (None, 0)]
                if failed:
                    raise RuntimeError(f"worker processes (index, exit code) {failed} failed; their output is above")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(processes) - len(results)} worker processes did not report in 600 s")
    finally:
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
    return start_value.value, results


# -- whole items (the original scenarios) ------------------------------------------


def scenario_costs(kind: str, count: int, rng: random.Random) -> list[float]:
    if kind == "long-tailed":
        # Lognormal item costs: most items small, a few ten times the median.
        return [rng.lognormvariate(0, 1.0) for _ in range(count)]
    return [1.0] * count


def greedy(costs: list[float], speeds: list[float]) -> float:
    """Makespan of dispatching whole items (or slices of the given costs) in order to whichever worker is free
    first, with no overhead at all: what dynamic dispatch can reach at best with units of this size."""
    free = [0.0] * len(speeds)
    for cost in costs:
        worker = min(range(len(speeds)), key=lambda w: free[w])
        free[worker] += cost / speeds[worker]
    return max(free)


def run_items(url, key, items, speeds):
    name = f"longtail-{uuid.uuid4().hex[:8]}"
    start, results = run_processes(item_worker, lambda i: (i, url, key, name, items, speeds[i]), len(speeds))
    results = dict(results)
    ends = [end for spans in results.values() for _begin, end in spans]
    busy = [sum(end - begin for begin, end in results[i]) for i in range(len(speeds))]
    counts = [len(results[i]) for i in range(len(speeds))]
    return max(ends) - start, busy, counts


def items_part(args, url, key) -> tuple[list[dict], tuple | None]:
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
    print("whole items (WorkQueue.items()), makespan / ideal", flush=True)
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
            dynamic, busy, counts = run_items(url, key, items, speeds)
            row = {
                "part": "items",
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
                f"  {label:<42} {row['slices']:>10}  ideal {ideal:5.2f}s  static {static:6.2f}s ({static / ideal:4.2f}x)"
                f"  whole-item bound {bound:5.2f}s ({bound / ideal:4.2f}x)"
                f"  dynamic {dynamic:5.2f}s ({dynamic / ideal:4.2f}x)  items per worker {counts}",
                flush=True,
            )
            if kind == "equal" and factor == max(factors) and chart_data is None:
                chart_data = (label, factor, static_busy, busy, ideal, static, dynamic)
    return rows, chart_data


# -- record ranges (the liquid tail) -------------------------------------------------


def range_costs(kind: str, records: int, rng: random.Random) -> list[float]:
    if kind == "lognormal":
        return [rng.lognormvariate(0, 1.0) for _ in range(records)]
    return [1.0] * records


def cost_file(folder: Path, kind: str, records: int, ideal_seconds: float, speeds: list[float]):
    """One CSV file of ``records`` lines "record id,cost", costs scaled to ``ideal_seconds`` at ``speeds``.

    Returns its path, the costs and the ideal makespan (all records shared perfectly).
    """
    raw = range_costs(kind, records, random.Random(2026))
    scale = ideal_seconds * sum(speeds) / sum(raw)
    costs = [c * scale for c in raw]
    path = folder / f"{kind}.csv"
    path.write_text("".join(f"{i},{c:.6f}\n" for i, c in enumerate(costs)))
    return path, costs, sum(costs) / sum(speeds)


def slices(path: Path, costs: list[float], count: int):
    """``count`` explicit slices of the file (``path?start=S&end=E``) and each slice's record costs."""
    edges = [round(i * len(costs) / count) for i in range(count + 1)]
    works = [f"{path}?start={a}&end={b}" for a, b in zip(edges, edges[1:])]
    return works, [costs[a:b] for a, b in zip(edges, edges[1:])]


def split_events(job_id: int, start: float) -> list[tuple[float, str, str]]:
    """The job's split and remainder events, as (seconds since the start, kind, message)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM at)::float8, kind, message FROM shardline_event"
            " WHERE job_id = %s AND kind IN ('split', 'remainder') ORDER BY at, id",
            [job_id],
        )
        return [(at - start, kind, message) for at, kind, message in cursor.fetchall()]


def run_ranges(url, key, works, speeds, split_tail, records: int) -> dict:
    name = f"liquid-{'on' if split_tail else 'off'}-{uuid.uuid4().hex[:8]}"
    start, results = run_processes(
        range_worker, lambda i: (i, url, key, works, name, speeds[i], split_tail), len(speeds)
    )
    read = Counter(record for result in results for record in result["read"])
    lasts = sorted(result["last"] - start for result in results)
    splits = [e for e in split_events(results[0]["job"], start) if e[1] == "split"]
    return {
        "makespan": lasts[-1],
        "exactly_once": read == Counter(range(records)),
        "duplicates": sum(1 for n in read.values() if n > 1),
        "missing": records - len(read),
        # Idle at the end: the makespan less each worker's last record (first to stop, and the median).
        "first_idle": lasts[-1] - lasts[0],
        "median_idle": lasts[-1] - lasts[len(lasts) // 2],
        "overshoot": sum(r["busy"] for r in results) / sum(r["nominal"] for r in results),
        "leases": [r["leases"] for r in sorted(results, key=lambda r: r["index"])],
        "traces": [r["trace"] for r in sorted(results, key=lambda r: r["index"])],
        "splits": len(splits),
        "first_split": splits[0][0] if splits else None,
        "last_split": splits[-1][0] if splits else None,
        "job": results[0]["job"],
        "start": start,
    }


def print_traces(traces) -> None:
    """Each worker's leases: when it arrived, its range as leased, the first and last record read, records read."""
    for index, trace in enumerate(traces):
        cells = []
        for arrived, first, stop, began, ended, count in trace:
            span = "-" if began is None else f"{began:.3f}-{ended:.3f}"
            cells.append(f"[{first},{stop}) @{arrived:.3f} {span} n={count}")
        print(f"      w{index}: " + "; ".join(cells))


def run_tfdata(per_slice, speeds, timeout) -> tuple[dict | None, str | None]:
    try:
        import tfdata_service
    except Exception as exc:  # not there yet, or TensorFlow missing
        return None, f"bench/tfdata_service.py not importable: {type(exc).__name__}: {exc}"
    try:
        return tfdata_service.run(per_slice, speeds, timeout=timeout), None
    except Exception as exc:
        return None, f"tf.data service failed: {type(exc).__name__}: {exc}"


def ranges_part(args, url, key) -> list[dict]:
    k = args.workers
    speeds = [0.25] + [1.0] * (k - 1)
    folder = Path(tempfile.mkdtemp(prefix="shardline-longtail-"))
    tfdata = not args.no_tfdata
    rows = []
    print(
        f"record ranges (WorkQueue.ranges(), work.records()): {k} workers, speeds {speeds}, "
        f"{args.records} records; makespan / ideal",
        flush=True,
    )
    print(
        f"  {'costs':<10} {'slices':>9} {'bound':>6} {'split on':>9} {'split off':>9} {'tf.data':>8}"
        f"  {'splits':>6} {'1st/last split s':>16} {'idle 1st/med s':>14} {'oversleep on/off':>16}  once"
    )
    for kind in args.costs.split(","):
        path, costs, ideal = cost_file(folder, kind, args.records, args.range_ideal_seconds, speeds)
        for factor in (int(f) for f in args.factors.split(",")):
            count = k * factor
            works, per_slice = slices(path, costs, count)
            row = {
                "part": "ranges",
                "costs": kind,
                "factor": factor,
                "slices": count,
                "records": args.records,
                "speeds": speeds,
                "ideal": ideal,
                "bound": greedy([sum(s) for s in per_slice], speeds) / ideal,
                "max_record_cost_slow": max(costs) / min(speeds),
            }
            for label, split_tail in (("split_on", True), ("split_off", False)):
                result = run_ranges(url, key, works, speeds, split_tail, args.records)
                row[label] = result["makespan"] / ideal
                row[f"{label}_run"] = {k_: v for k_, v in result.items() if k_ not in ("start",)}
                if split_tail and args.timeline:
                    for at, kind_, message in split_events(result["job"], result["start"]):
                        print(f"      {at:7.3f}s {kind_:<9} {message}")
                    print_traces(result["traces"])
            note = None
            if tfdata:
                result, note = run_tfdata(per_slice, speeds, args.tfdata_timeout)
                if result is not None:
                    row["tfdata"] = result["makespan"] / ideal
                    row["tfdata_exactly_once"] = result["duplicates"] == 0 and result["missing"] == 0
                    row["tfdata_run"] = result
            rows.append(row)
            on, off = row["split_on_run"], row["split_off_run"]
            tf_cell = f"{row['tfdata']:7.2f}x" if "tfdata" in row else "      -"
            splits = f"{on['first_split']:6.2f}/{on['last_split']:<6.2f}" if on["first_split"] is not None else "-"
            once = on["exactly_once"] and off["exactly_once"] and row.get("tfdata_exactly_once", True)
            print(
                f"  {kind:<10} {f'{factor}x ({count})':>9} {row['bound']:5.2f}x {row['split_on']:8.2f}x "
                f"{row['split_off']:8.2f}x {tf_cell}  {on['splits']:>6} {splits:>16} "
                f"{on['first_idle']:5.2f}/{on['median_idle']:<5.2f}   {on['overshoot']:5.3f}/{off['overshoot']:<5.3f}    "
                + (
                    "yes"
                    if once
                    else f"NO (on: {on['duplicates']} dup {on['missing']} missing; "
                    f"off: {off['duplicates']} dup {off['missing']} missing)"
                ),
                flush=True,
            )
            if note:
                print(f"    (no tf.data row: {note})", flush=True)
                if "not importable" in note:
                    tfdata = False
    met = all(row["split_on"] <= TARGET for row in rows)
    print(
        f"  target split on <= {TARGET}x ideal in every record-range run: {'met' if met else 'NOT met'}"
        f" (split on {min(r['split_on'] for r in rows):.2f}x-{max(r['split_on'] for r in rows):.2f}x)"
    )
    print(
        "  every record read exactly once in every run: "
        + str(all(r["split_on_run"]["exactly_once"] and r["split_off_run"]["exactly_once"] for r in rows))
    )
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--parts", default="ranges", help="ranges (record ranges, the default), items (whole items), or items,ranges"
    )
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--ideal-seconds", type=float, default=6.0, help="the ideal makespan of whole-item runs")
    parser.add_argument(
        "--range-ideal-seconds", type=float, default=30.0, help="the ideal makespan of record-range runs"
    )
    parser.add_argument("--chart", default=str(ROOT / "bench" / "longtail.png"))
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--factors", default="1,4,10", help="slices per worker to run, comma-separated (the chart is of the largest)"
    )
    parser.add_argument("--records", type=int, default=4800, help="records per cost scenario, all slices together")
    parser.add_argument("--costs", default="equal,lognormal", help="record-range cost scenarios")
    parser.add_argument("--no-tfdata", action="store_true", help="skip the tf.data service row")
    parser.add_argument("--tfdata-timeout", type=float, default=300)
    parser.add_argument("--timeline", action="store_true", help="print each split-on run's split events")
    parser.add_argument("--server-log-level", default="WARNING", help="LOG_LEVEL of the server (INFO: splits)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))

    key = prepare("longtail bench")
    from django.conf import settings

    from tests.support import ServerProcess, database_url

    server = ServerProcess(
        database_url(settings.DATABASES["default"]), workers=4, extra_env={"LOG_LEVEL": args.server_log_level}
    ).start()
    began = time.time()
    rows, chart_data = [], None
    try:
        if "items" in parts:
            item_rows, chart_data = items_part(args, server.url, key)
            rows += item_rows
        if "ranges" in parts:
            rows += ranges_part(args, server.url, key)
    finally:
        server.stop()

    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    if chart_data and draw(chart_data, args.chart):
        print(f"chart: {args.chart}")
    print(
        f"machine: {os.cpu_count()} CPUs; {args.workers} worker processes; Python {sys.version.split()[0]};"
        f" {time.time() - began:.0f} s"
    )


def draw(data, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart (pip install matplotlib)")
        return False
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
    return True


if __name__ == "__main__":
    main()
