"""The long-tail workload through TensorFlow's tf.data service with dynamic sharding.

Usage:  .venv/bin/python bench/tfdata_service.py [--workers 8] [--slices-per-worker 1,4,10]
            [--ideal-seconds 6] [--records-per-slice 100] [--mode colocated|shared|both]

`run(slices, speeds)` gives the side-by-side row for bench/longtail.py: the same
job (slices of records, the cost of each record in seconds at speed 1.0) read by
len(speeds) consumer processes, consumer k "processing" a record by sleeping
cost / speeds[k], the records handed out by a tf.data service job with
`processing_mode=ShardingPolicy.DYNAMIC` that all consumers share (one
`job_name`, so each record goes to exactly one consumer).

The dataset is `Dataset.from_tensor_slices(slice indices).flat_map(records of
that slice as (slice, index))`. Under DYNAMIC sharding the dispatcher hands
the source's splits - one slice index each - to the tf.data *workers*, one at
a time, whenever a worker's iterator runs out; what a *consumer* receives
depends on how consumers are mapped to workers (`mode`):

  colocated (default)  one tf.data WorkerServer inside each consumer process,
               read with `target_workers="LOCAL"`: the usual deployment (a
               worker on every trainer host) and the honest comparison with
               Shardline: the unit a consumer takes is one slice, taken when
               its worker has drained the previous one.
  shared       one WorkerServer beside the dispatcher, read by every consumer
               (first come, first served): the worker streams the slices
               record by record, so the unit a consumer takes is one record,
               finer than the slice (and every record costs a gRPC round trip
               to the one worker).

Server placement: the dispatcher (and the shared worker) run in a child
process, not in the caller. That keeps TensorFlow and its gRPC threads out of
the calling process (bench/longtail.py imports Django and runs its own
server), lets us kill the whole service by one pid on a timeout, and makes
every TF process a fresh spawn (no fork of a process holding TF threads). On a
2-core machine it costs one more Python+TF process, ~2 s of CPU at start-up,
spent before the measured window. Colocated workers must live in the consumer
processes: "LOCAL" means in-process.

Start: the consumers import TF, build the pipeline and create the iterator
(which creates the job and its iteration at the dispatcher; no element is
requested before the first `next`), then report ready. When all are ready the
parent fixes a start time 0.5 s ahead and hands it to all of them (a shared
Value + Event): on 2 cores, importing TF in 8-9 processes takes tens of
seconds, so a start time fixed in advance would have to be either fragile or
very far off. makespan = last record's end - start time.

Settings chosen (everything else is the tf.data service default):
  compression=None   the default "AUTO" adds a worker-side
               `map(compress, num_parallel_calls=AUTOTUNE)`, a parallel
               buffer of elements ahead of the consumer (in colocated mode
               that lets a worker pull the next slice early); our elements are
               two int64s, compression only costs CPU.
  inject_prefetch off (worker and consumer pipelines)  so that tf.data does
               not add an autotuned prefetch buffer on either side; the only
               read-ahead left is the service's own: the worker's
               first-come-first-served task runner buffers one element, and
               the client keeps max_outstanding_requests requests in flight,
               left at its default (AUTOTUNE = the number of tasks it reads,
               i.e. 1 here: one record outstanding per consumer).
  worker heartbeat_interval_ms=500 (default 30 s)  only makes a worker that
               registers late learn of its task quickly; tasks of a new job
               are pushed to already-registered workers at once anyway.

Import cost: this module imports tensorflow only inside the child processes.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue as queue_lib
import random
import sys
import time
import uuid

# Quieter TensorFlow in the children (spawned children inherit the environment).
_CHILD_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1"}
MODES = ("colocated", "shared")
_WORKER_HEARTBEAT_MS = 500


def _quiet_tf():
    for name, value in _CHILD_ENV.items():
        os.environ.setdefault(name, value)


def _server(mode, ready, stop):
    """Child process: the dispatcher, plus the one worker in "shared" mode."""
    _quiet_tf()
    try:
        import tensorflow as tf

        service = tf.data.experimental.service
        dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
        address = dispatcher.target.split("://", 1)[1]
        workers = []
        if mode == "shared":
            workers.append(
                service.WorkerServer(
                    service.WorkerConfig(dispatcher_address=address, heartbeat_interval_ms=_WORKER_HEARTBEAT_MS)
                )
            )
        ready.put(("ok", dispatcher.target))
    except BaseException as error:  # report, do not hang the parent
        ready.put(("error", f"{type(error).__name__}: {error}"))
        return
    stop.wait()
    for worker in workers:
        worker.stop()
    dispatcher.stop()


def _dataset(tf, lengths):
    """(slice, index) for every record, slice after slice; splits = slice indices."""
    lengths_t = tf.constant(lengths, dtype=tf.int64)

    def records(s):
        return tf.data.Dataset.range(lengths_t[s]).map(lambda j: (s, j))

    dataset = tf.data.Dataset.from_tensor_slices(tf.range(len(lengths), dtype=tf.int64)).flat_map(records)
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    return dataset.with_options(options)


def _consumer(k, mode, target, job_name, slices, speed, events, start_value, start_event, out):
    _quiet_tf()
    try:
        import tensorflow as tf

        service = tf.data.experimental.service
        worker = None
        if mode == "colocated":
            worker = service.WorkerServer(
                service.WorkerConfig(
                    dispatcher_address=target.split("://", 1)[1], heartbeat_interval_ms=_WORKER_HEARTBEAT_MS
                )
            )
        dataset = _dataset(tf, [len(s) for s in slices]).apply(
            service.distribute(
                processing_mode=service.ShardingPolicy.DYNAMIC,
                service=target,
                job_name=job_name,
                compression=None,
                target_workers="LOCAL" if mode == "colocated" else "AUTO",
            )
        )
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        dataset = dataset.with_options(options)
        iterator = iter(dataset)  # creates the job + iteration; fetching starts at the first next()
        events.put(("ready", k))
        start_event.wait()
        time.sleep(max(0.0, start_value.value - time.time()))
        records, last = [], None
        for s, j in iterator:
            s, j = int(s), int(j)
            time.sleep(slices[s][j] / speed)
            last = time.time()
            records.append((s, j))
        out.put((k, records, last, None))
        del iterator
        if worker is not None:
            worker.stop()
    except BaseException as error:
        events.put(("error", k))
        out.put((k, [], None, f"{type(error).__name__}: {error}"))


def start_service(context, mode: str, timeout: float):
    """The dispatcher (and, in "shared" mode, the one worker) in a child process: (process, target, stop event)."""
    ready, stop = context.Queue(), context.Event()
    server = context.Process(target=_server, args=(mode, ready, stop), daemon=True)
    server.start()
    try:
        status, target = ready.get(timeout=max(1.0, timeout))
    except queue_lib.Empty:
        server.kill()
        raise TimeoutError(f"tf.data service did not start within {timeout} s") from None
    if status != "ok":
        server.kill()
        raise RuntimeError(f"tf.data service failed to start: {target}")
    return server, target, stop


def item_consumer(worker: str, target: str, job_name: str, items: int, cost: float, start, out) -> None:
    """Child process: a colocated tf.data worker and its consumer, reading whole items (one split each).

    Streams ("ready" | "start" | "done" | "finished", worker, item, time)
    to ``out``, as bench/dead_worker.py's Shardline consumers do, so a
    consumer SIGKILLed mid-item shows what it had started.
    """
    _quiet_tf()
    import tensorflow as tf

    service = tf.data.experimental.service
    server = service.WorkerServer(
        service.WorkerConfig(dispatcher_address=target.split("://", 1)[1], heartbeat_interval_ms=_WORKER_HEARTBEAT_MS)
    )
    dataset = _dataset(tf, [1] * items).apply(
        service.distribute(
            processing_mode=service.ShardingPolicy.DYNAMIC,
            service=target,
            job_name=job_name,
            compression=None,
            target_workers="LOCAL",
        )
    )
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    iterator = iter(dataset.with_options(options))
    out.put(("ready", worker, None, None))
    start.wait()
    for item, _record in iterator:
        item = f"/items/{int(item):04d}"
        out.put(("start", worker, item, time.time()))
        time.sleep(cost)
        out.put(("done", worker, item, time.time()))
    out.put(("finished", worker, None, time.time()))
    del iterator
    server.stop()


def run(slices: list[list[float]], speeds: list[float], timeout: float = 300, *, mode: str = "colocated") -> dict:
    """Read `slices` with len(speeds) consumer processes through one tf.data
    service job (DYNAMIC sharding; split = one slice), consumer k sleeping
    cost / speeds[k] per record.

    Returns {"makespan", "records", "duplicates", "missing"} plus
    "records_per_consumer" and "slices_per_consumer" (how many distinct slices
    each consumer touched) and "mode". Warns (does not raise) on duplicates or
    missing records; raises TimeoutError, after stopping every child, when the
    whole run (start-up included) takes more than `timeout` seconds.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    deadline = time.time() + timeout
    slices = [[float(c) for c in s] for s in slices]
    context = multiprocessing.get_context("spawn")
    server, target, stop = start_service(context, mode, deadline - time.time())
    processes = [server]
    try:
        events, out = context.Queue(), context.Queue()
        start_value, start_event = context.Value("d", 0.0), context.Event()
        job_name = f"longtail-{uuid.uuid4().hex[:12]}"
        consumers = [
            context.Process(
                target=_consumer,
                args=(k, mode, target, job_name, slices, speed, events, start_value, start_event, out),
                daemon=True,
            )
            for k, speed in enumerate(speeds)
        ]
        processes += consumers
        for process in consumers:
            process.start()
        ready = 0
        while ready < len(consumers):
            kind, _k = events.get(timeout=max(0.1, deadline - time.time()))
            if kind != "ready":
                break  # its error arrives on `out` below
            ready += 1
        start_value.value = time.time() + 0.5
        start = start_value.value
        start_event.set()
        results = {}
        while len(results) < len(consumers):
            k, records, last, error = out.get(timeout=max(0.1, deadline - time.time()))
            if error:
                raise RuntimeError(f"consumer {k} failed: {error}")
            results[k] = (records, last)
    except queue_lib.Empty:
        raise TimeoutError(f"tf.data service run did not finish within {timeout} s") from None
    finally:
        stop.set()
        for process in processes:
            process.join(max(0.1, min(10.0, deadline + 10 - time.time())))
            if process.is_alive():
                process.kill()
                process.join(5)

    counts: dict[tuple[int, int], int] = {}
    for records, _last in results.values():
        for record in records:
            counts[record] = counts.get(record, 0) + 1
    expected = {(s, j) for s, slice_costs in enumerate(slices) for j in range(len(slice_costs))}
    duplicates = sum(1 for n in counts.values() if n > 1)
    missing = len(expected - counts.keys())
    if duplicates or missing:
        print(f"WARNING: tf.data service run: {duplicates} records read more than once, {missing} never read")
    ends = [last for _records, last in results.values() if last is not None]
    return {
        "makespan": (max(ends) - start) if ends else float("nan"),
        "records": sum(len(records) for records, _last in results.values()),
        "duplicates": duplicates,
        "missing": missing,
        "records_per_consumer": [len(results[k][0]) for k in range(len(speeds))],
        "slices_per_consumer": [len({s for s, _j in results[k][0]}) for k in range(len(speeds))],
        "mode": mode,
    }


def greedy_slices(slices: list[list[float]], speeds: list[float]) -> float:
    """Makespan of handing out whole slices in order to whichever consumer is
    free first, with no overhead: the best a slice-granular dispatch can do."""
    free = [0.0] * len(speeds)
    for slice_costs in slices:
        k = min(range(len(speeds)), key=lambda w: free[w])
        free[k] += sum(slice_costs) / speeds[k]
    return max(free)


def make_slices(kind: str, num_slices: int, per_slice: int, speeds: list[float], ideal_seconds: float, seed: int):
    """Slices whose ideal makespan (total cost / total speed) is ideal_seconds."""
    rng = random.Random(seed)
    if kind == "lognormal":
        raw = [[rng.lognormvariate(0, 1.0) for _ in range(per_slice)] for _ in range(num_slices)]
    else:
        raw = [[1.0] * per_slice for _ in range(num_slices)]
    scale = ideal_seconds * sum(speeds) / sum(map(sum, raw))
    return [[c * scale for c in s] for s in raw]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=8, help="consumer processes (one of them 4x slower)")
    parser.add_argument("--slices-per-worker", default="1,4,10", help="factors, comma-separated")
    parser.add_argument("--ideal-seconds", type=float, default=6.0)
    parser.add_argument("--records-per-slice", type=int, default=100)
    parser.add_argument("--costs", default="equal,lognormal", help="cost kinds to run: equal, lognormal")
    parser.add_argument("--mode", default="colocated", choices=[*MODES, "both"])
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()

    k = args.workers
    speeds = [0.25] + [1.0] * (k - 1)
    factors = [int(f) for f in args.slices_per_worker.split(",")]
    modes = MODES if args.mode == "both" else (args.mode,)
    for kind in args.costs.split(","):
        for factor in factors:
            slices = make_slices(kind, k * factor, args.records_per_slice, speeds, args.ideal_seconds, seed=factor)
            ideal = sum(map(sum, slices)) / sum(speeds)
            bound = greedy_slices(slices, speeds)
            for mode in modes:
                result = run(slices, speeds, timeout=args.timeout, mode=mode)
                print(
                    f"tf.data service ({mode:<9}) {kind:<9} costs  {factor:>2}x ({k * factor:>3} slices x "
                    f"{args.records_per_slice} records)  ideal {ideal:5.2f}s  makespan {result['makespan']:6.2f}s"
                    f"  makespan/ideal {result['makespan'] / ideal:5.2f}x  (whole-slice bound {bound / ideal:4.2f}x)"
                    f"  records {result['records']} dup {result['duplicates']} missing {result['missing']}"
                    f"  slow consumer: {result['slices_per_consumer'][0]} slices,"
                    f" {result['records_per_consumer'][0]} records",
                    flush=True,
                )
    print(f"machine: {os.cpu_count()} CPUs; {k} consumer processes; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
