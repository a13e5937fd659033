"""The liquid tail in the consumer shapes training scripts read with, side by side in one run.

Usage:  .venv/bin/python bench/shapes.py [--shapes ranges,dataset1,dataset4,blocks1,torch0,torch2,loader2,items,...]
            [--workers 8] [--factors 1] [--costs equal] [--ideal-seconds 6] [--records 1200]
            [--no-split-off] [--tfdata] [--prefetch-factor N] [--json FILE]

K worker processes (one 4x slower than the others) share one job of record
ranges through the ASGI server of tests/support.py (gunicorn with uvicorn
workers over server.asgi, 4 web processes), as bench/longtail.py's ranges
part does: one CSV file of --records lines "record id,cost", cut into
num_slices = factor x K slices given to the job as explicit ranges. Each
worker trains on a record by sleeping cost / speed in its training loop, in
one of these shapes:

  ranges     for work in queue.ranges(): for line in work.records(): ...
  dataset1   for line in queue.dataset(cycle_length=1).as_numpy_iterator(): ...
  dataset4   the same, cycle_length=4
  blocks1    dataset1 with hand_over_seconds=0.01 (records handed to TensorFlow in blocks)
  blocks4    the same, cycle_length=4
  torch0     for line in DataLoader(WorkQueueDataset(queue, reader=readers.records), batch_size=None)
  torch2     the same with num_workers=2 (loader processes)
  torch8     the same with num_workers=8
  loader2    torch2 through WorkQueueLoader (batches in the order they are read)
  loader8    torch8 through WorkQueueLoader
             (--prefetch-factor N: the DataLoaders' prefetch_factor, torch's 2 by default)

and whole items, read by the loop itself with the SDK's reader (no claims,
so no splits: their bar is the best schedule of whole slices, the "bound"):

  items      for item in queue.items(): for line in readers.records(item): ...
             (items taken ahead while the loop reads: WorkQueue's look_ahead, the default)
  items0     the same with look_ahead=0 (each item taken when the loop asks)
  take       the same over eager queue.take() until OutOfRangeError
  takegraph  the same over a graph's queue.take() op, run in a tf.compat.v1.Session
  inputs     the same over queue.input_dataset()

and, for the TF shapes, a floor that no dispatch is in:

  tffloor    each worker's fair share of the records (a contiguous range
             sized by its speed, so that all would end together) read through
             tf.data.Dataset.from_generator with the options dataset() sets,
             no queue at all: what a record-by-record TF loop costs on this
             machine beside the records' own work (TensorFlow's per-record
             CPU, 8 TF processes sharing the cores)

SyncLoader (synchronous training) is not a row here but bench/ddp_sync.py:
its ranks run the same steps an epoch, so a rank 4x slower sets the pace of
every rank at each step's all-reduce, whatever hands out the data, and there
is no tail to split; that bench prints its records/s beside
DistributedSampler's, each epoch's edges (the wait for its first batch and
the time from its last step to the loop's end) and every record once.

A DataLoader starts its loader processes when the loop asks for its
iterator. The workers ask for it before the common start, and each loader
waits in its worker_init_fn until the start, so that the run measures
dispatch, not the start of processes. The loaders start as a training
script's would (``python train.py``: the platform's default start method,
fork on Linux before Python 3.14), not as this bench's spawned workers
would by default: a spawned loader imports PyTorch again as it starts and
tears it down as it exits (on 2 cores, 16 loaders took about 15 s to start
and 2-3 s to exit). The TF shapes build their dataset and iterator (a
graph's take op and session) before the start for the same reason:
TensorFlow sets up its runtime with the first one, which runs before
2026-11-28 counted in every TF row (bench/RESULTS.md). Each worker also
runs its first full garbage collection before the start: inside the run
it cost every loop of a 6-s job 0.3-0.6 s (2026-11-29).

Each row prints, for split_tail on (and off, beside it): makespan / ideal
(the last record trained on, from the common start); the records the slow
worker trained on (its fair share is speed / total speed of all records);
the end lag (from the job's last record to each worker's loop exit: the
largest of the K, which at K=8 is the p99); and whether every record was
trained on exactly once. --tfdata adds tf.data service with dynamic
sharding on the same slices and speeds (bench/tfdata_service.py) to each
row: a TF dataset's equivalent. Uses DATABASE_URL when set, else the
embedded Postgres.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import _env  # noqa: F401  (first: it sets up the project)
from _env import serve, tf_records

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the spawned workers' TensorFlow start-up chatter
from longtail import cost_file, greedy, run_processes, run_tfdata, slices

SHAPES = (
    "ranges",
    "dataset1",
    "dataset4",
    "blocks1",
    "blocks4",
    "torch0",
    "torch2",
    "torch8",
    "loader2",
    "loader8",
    "items",
    "items0",
    "take",
    "takegraph",
    "inputs",
    "tffloor",
)
TF_SHAPES = ("dataset1", "dataset4", "blocks1", "blocks4", "take", "takegraph", "inputs", "tffloor")
SLOW = 0.25  # the slow worker's speed; the others run at 1.0
BLOCK_SECONDS = 0.01  # the blocks shapes' hand_over_seconds
PREFETCH = "SHARDLINE_BENCH_PREFETCH_FACTOR"


def training_loop(queue, shape: str, start=None):
    """The records of ``queue`` as the training loop of ``shape`` receives them (bytes lines).

    ``start``: (an event, the start time's value), which a DataLoader's
    loader processes wait for before they read; each says it is up first
    (``loader_waits``).
    """
    if shape == "ranges":
        return (line for work in queue.ranges() for line in work.records())
    if shape in ("items", "items0", "take", "takegraph", "inputs"):
        from worker_sdk import readers

        return (line for item in item_strings(queue, shape) for line in readers.records(item))
    if shape.startswith("dataset"):
        return queue.dataset(cycle_length=int(shape[len("dataset") :])).as_numpy_iterator()
    if shape.startswith("blocks"):
        cycle_length = int(shape[len("blocks") :])
        return queue.dataset(cycle_length=cycle_length, hand_over_seconds=BLOCK_SECONDS).as_numpy_iterator()
    if shape.startswith(("torch", "loader")):
        from torch.utils.data import DataLoader

        from worker_sdk import readers
        from worker_sdk.torch import WorkQueueDataset, WorkQueueLoader

        dataset = WorkQueueDataset(queue, reader=readers.records)
        loaders = int(shape.removeprefix("torch").removeprefix("loader"))
        kind = WorkQueueLoader if shape.startswith("loader") else DataLoader
        # --prefetch-factor, passed to the spawned workers in the environment.
        prefetch = {"prefetch_factor": int(os.environ[PREFETCH])} if loaders and PREFETCH in os.environ else {}
        if not (loaders and start):
            return iter(kind(dataset, batch_size=None, num_workers=loaders, **prefetch))
        # What multiprocessing starts in a script run from the shell (the first method is the default).
        context = multiprocessing.get_context(multiprocessing.get_all_start_methods()[0])
        up = context.SimpleQueue()
        wait = functools.partial(loader_waits, up, *start)
        lines = iter(
            kind(
                dataset,
                batch_size=None,
                num_workers=loaders,
                worker_init_fn=wait,
                multiprocessing_context=context,
                **prefetch,
            )
        )
        for _ in range(loaders):
            up.get()
        return lines
    raise ValueError(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")


def fair_shares(costs: list[float], speeds: list[float]) -> list[tuple[int, int]]:
    """Contiguous record ranges, one per worker, each as near its speed's share of the total cost as whole records allow."""
    total, edges, spent, at = sum(costs), [0], 0.0, 0
    for speed in speeds[:-1]:
        target = spent + total * speed / sum(speeds)
        while at < len(costs) and spent + costs[at] / 2 < target:
            spent += costs[at]
            at += 1
        edges.append(at)
    edges.append(len(costs))
    return list(zip(edges, edges[1:]))


def item_strings(queue, shape: str):
    """The item strings of a whole-item shape, as its loop gets them (its TF dataset, op and session built now)."""
    if shape in ("items", "items0"):
        return queue.items()
    import tensorflow as tf

    if shape == "inputs":
        return (item.decode() for item in queue.input_dataset().as_numpy_iterator())
    if shape == "takegraph":
        return graph_takes(tf, queue.take(), tf.compat.v1.Session())
    return eager_takes(tf, queue)


def graph_takes(tf, take, session):
    try:
        while True:
            try:
                yield session.run(take).decode()
            except tf.errors.OutOfRangeError:
                return
    finally:
        session.close()


def eager_takes(tf, queue):
    while True:
        try:
            yield queue.take().numpy().decode()
        except tf.errors.OutOfRangeError:
            return


def wait_for_start(go, start_value) -> None:
    """Waits for the run's common start."""
    go.wait(600)
    time.sleep(max(0.0, start_value.value - time.time()))


def loader_waits(up, go, start_value, loader_id: int) -> None:
    """A DataLoader's worker_init_fn: says the loader process is up, then waits for the start."""
    up.put(loader_id)
    wait_for_start(go, start_value)


def shape_worker(index, url, key, works, name, speed, split_tail, shape, ready, go, start_value, out):
    from worker_sdk import WorkQueue

    if shape in TF_SHAPES:
        import tensorflow as tf  # before the start: importing it takes seconds

        if shape == "takegraph":
            tf.compat.v1.disable_eager_execution()
    elif shape.startswith(("torch", "loader")):
        import torch.utils.data  # noqa: F401

    if shape == "tffloor":  # no queue: works holds this worker's share
        from worker_sdk import readers

        lines = tf_records(functools.partial(readers.records, works[index]))
        gc.collect()
        ready.put(index)
        wait_for_start(go, start_value)
        read, last = train(lines, speed, start_value.value)
        out.put({"index": index, "job": None, "read": read, "last": last, "exited": time.time()})
        return
    queue = WorkQueue(
        works,
        shuffle=False,
        name=name,
        url=url,
        token=key,
        worker=f"w{index}",
        split_tail=split_tail,
        look_ahead=0 if shape == "items0" else None,
    )
    job = queue.job  # attached before the start: the run measures dispatch, not set-up
    # A DataLoader's loader processes start now, and wait for the start. A
    # TF dataset and its iterator (a graph's take op and session) are built
    # now too: TensorFlow sets up its runtime with the first one, and
    # nothing is taken until the loop asks for its first record. Eager
    # take() leases as it is called.
    if shape.startswith(("torch", "loader")):
        lines = training_loop(queue, shape, (go, start_value))
    elif shape != "take":
        lines = training_loop(queue, shape)
    else:
        lines = None
    # The process's first full garbage collection runs now, not inside the
    # run: with PyTorch or TensorFlow imported it took 0.3-0.6 s, 8 processes
    # at once on 2 cores, and whether it fell before or after the start
    # depended on how much the code under test had allocated by then
    # (bench/RESULTS.md).
    gc.collect()
    ready.put(index)
    wait_for_start(go, start_value)
    read, last = train(lines if lines is not None else training_loop(queue, shape), speed, start_value.value)
    exited = time.time()
    queue.close()
    out.put({"index": index, "job": job["id"], "read": read, "last": last, "exited": exited})


def train(lines, speed: float, start: float) -> tuple[list[int], float]:
    """The training loop: each record's cost slept at this worker's speed. The records read and the last one's time."""
    read, last = [], start
    for line in lines:
        record, cost = bytes(line).split(b",")
        time.sleep(float(cost) / speed)
        last = time.time()
        read.append(int(record))
    return read, last


def run_shape(url, key, works, speeds, split_tail, shape, records) -> dict:
    name = f"shapes-{shape}-{'on' if split_tail else 'off'}-{uuid.uuid4().hex[:8]}"
    start, results = run_processes(
        shape_worker, lambda i: (i, url, key, works, name, speeds[i], split_tail, shape), len(speeds), daemon=False
    )
    read = Counter(record for result in results for record in result["read"])
    end = max(result["last"] for result in results)
    slow = next(result for result in results if result["index"] == 0)
    return {
        "makespan": end - start,
        "exactly_once": read == Counter(range(records)),
        "duplicates": sum(1 for n in read.values() if n > 1),
        "missing": records - len(read),
        "slow_read": len(slow["read"]),
        "end_lag": max(result["exited"] - end for result in results),
        # Each worker's last record and loop exit, seconds from the start, by worker index.
        "workers": [
            (round(r["last"] - start, 3), round(r["exited"] - start, 3))
            for r in sorted(results, key=lambda r: r["index"])
        ],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--factors", default="1", help="slices per worker, comma-separated")
    parser.add_argument("--costs", default="equal", help="record costs, comma-separated: equal, lognormal")
    parser.add_argument("--ideal-seconds", type=float, default=6.0)
    parser.add_argument("--records", type=int, default=1200)
    parser.add_argument("--no-split-off", action="store_true", help="skip the split_tail=off runs")
    parser.add_argument("--tfdata", action="store_true", help="add tf.data service (dynamic sharding) to each row")
    parser.add_argument("--tfdata-timeout", type=float, default=300)
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--prefetch-factor", type=int, default=None, help="the DataLoaders' prefetch_factor (default: torch's, 2)"
    )
    args = parser.parse_args()
    if args.prefetch_factor is not None:
        if args.prefetch_factor < 1:
            parser.error("--prefetch-factor must be at least 1")
        os.environ[PREFETCH] = str(args.prefetch_factor)
    shapes = args.shapes.split(",")
    for shape in shapes:
        if shape not in SHAPES:
            parser.error(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")
    for kind in args.costs.split(","):
        if kind not in ("equal", "lognormal"):
            parser.error(f"unknown costs {kind!r}: equal or lognormal (comma-separated for both)")

    server, key = serve("shapes bench")
    speeds = [SLOW] + [1.0] * (args.workers - 1)
    folder = Path(tempfile.mkdtemp(prefix="shardline-shapes-"))
    began, rows = time.time(), []
    print(
        f"{args.workers} workers, speeds {speeds}, {args.records} records, ideal {args.ideal_seconds} s; "
        "makespan / ideal, the slow worker's records (fair share), end lag s, exactly once",
        flush=True,
    )
    print(f"  {'costs':<9} {'slices':>8} {'shape':<9} {'split on':>24} {'split off':>24} {'tf.data':>8}")
    try:
        for kind in args.costs.split(","):
            path, costs, ideal = cost_file(folder, kind, args.records, args.ideal_seconds, speeds)
            fair = round(args.records * SLOW / sum(speeds))
            for factor in (int(f) for f in args.factors.split(",")):
                count = args.workers * factor
                works, per_slice = slices(path, costs, count)
                tf_cell = "-"
                if args.tfdata:
                    result, note = run_tfdata(per_slice, speeds, args.tfdata_timeout)
                    tf_cell = f"{result['makespan'] / ideal:.2f}x" if result else "failed"
                    if note:
                        print(f"    (tf.data: {note})", flush=True)
                for shape in shapes:
                    row = {"costs": kind, "factor": factor, "slices": count, "shape": shape, "ideal": ideal}
                    row["bound"] = greedy([sum(s) for s in per_slice], speeds) / ideal
                    shape_works = works
                    if shape == "tffloor":  # each worker's fair share, by index
                        shape_works = [f"{path}?start={a}&end={b}" for a, b in fair_shares(costs, speeds)]
                    cells = []
                    for label, split_tail in (("split_on", True), ("split_off", False)):
                        # tffloor has no queue, so no split_tail to turn off.
                        if label == "split_off" and (args.no_split_off or shape == "tffloor"):
                            cells.append("-")
                            continue
                        result = run_shape(server.url, key, shape_works, speeds, split_tail, shape, args.records)
                        row[label] = result
                        cells.append(
                            f"{result['makespan'] / ideal:.2f}x {result['slow_read']:>4} {result['end_lag']:5.2f}s "
                            + (
                                "yes"
                                if result["exactly_once"]
                                else f"NO ({result['duplicates']}d/{result['missing']}m)"
                            )
                        )
                    row["tfdata"] = tf_cell
                    rows.append(row)
                    print(
                        f"  {kind:<9} {f'{factor}x ({count})':>8} {shape:<9} {cells[0]:>24} {cells[1]:>24} {tf_cell:>8}"
                        f"   (bound {row['bound']:.2f}x, fair share {fair})",
                        flush=True,
                    )
    finally:
        server.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    print(f"machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}; {time.time() - began:.0f} s")


if __name__ == "__main__":
    main()
