"""Synchronous training: a DDP step loop over SyncLoader (planned and agreed) beside DistributedSampler, in one run.

Usage:  .venv/bin/python bench/ddp_sync.py [--files 12] [--lines 2000] [--slices-per-file 4] [--epochs 3]
            [--batch 32] [--loaders 0,2] [--step-ms 0,5] [--repeats 3] [--allreduce-calls 1000]
            [--profile planned,agreed,sampler]

Every run is one torchrun of 2 ranks (`python -m torch.distributed.run
--standalone --nproc_per_node=2`, gloo on the CPU, OMP_NUM_THREADS=1) of this
file with --rank-main. Each step is a real DDP step of a tiny model (2 -> 8
-> 1, forward, backward with its gradient all-reduce, SGD step), then
--step-ms of sleep (the step's own compute, standing in for a real model).
The data: --files CSV files of --lines lines ``a,b,label``, --epochs epochs,
batches of --batch per rank, --loaders loader processes per rank (a
DataLoader's num_workers). Three loaders read the same lines:

  sync planned        SyncLoader over a WorkQueue of the files cut into
                      --slices-per-file explicit slices ``path?start=S&end=E``
                      (record ranges: each epoch's steps counted up front,
                      no collective per step)
  sync agreed         SyncLoader over the whole files (records unknown: the
                      ranks agree each step with one all-reduce of one int)
  DistributedSampler  a map-style Dataset over the same lines (an index of
                      (file, byte offset, length) built up front; __getitem__
                      reads its line with os.pread), DistributedSampler
                      (shuffle, drop_last=True) and a DataLoader with the same
                      batch size and num_workers: the static-shard baseline

All three parse lines into tensors in the same collate function (in the
loader processes when there are any) and make a new DataLoader each epoch
(SyncLoader does; no persistent_workers for the baseline either). The
WorkQueue runs are served by the real stack: the ASGI server of
tests/support.py (4 web processes) on DATABASE_URL (else the embedded
Postgres), a fresh SHARDLINE_RUN (so a job of its own) per run.

Each rank times its step loop from a barrier after process-group init, job
creation and index building to a barrier after the last epoch; the time of
a run is the slower rank's. records/s = records trained by both ranks / that
time. Configurations run --repeats times, the three loaders interleaved in a
rotating order; the table shows every run's records/s, their median, steps
per rank (all epochs) and median / DistributedSampler's median (above 1.00x:
faster than the baseline), and the CPU each 1,000 records cost over the
step loops: the ranks' own processes (``time.process_time``, every thread;
loader processes not included) and the web server's and Postgres's
processes (read from /proc by rank 0 at the loop's ends), and each epoch's
edges: the wait for its first batch plus the time from its last step to
the loop's end (a SyncLoader plans the epoch and takes its first leases at
one edge, completes its last and meets the other ranks at the other),
which a short epoch pays as much as a long one. At --step-ms 0
they share the machine's cores, so records/s follows the total. At --step-ms 0 the step loop is nearly all input
and collective overhead; at a nonzero --step-ms the sleep sets the ceiling
(records/s <= 2 * batch * 1000 / step-ms). Separately, after each run's loop,
each rank times --allreduce-calls all-reduces (MIN) of a one-element int
tensor: what sync agreed adds per step; its median is printed beside the
median step time of the baseline. --profile runs each named loader once more
(loaders 0, step-ms 0) with rank 0 under cProfile and prints its top
functions by cumulative time.

About 9 minutes at the defaults on the 2-core machine (36 torchruns, each
with 3-4 s of start-up outside the timed loop), 20 s more per profiled loader.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _env import ROOT, prepare  # first: it sets up the project

MODES = {"planned": "sync planned", "agreed": "sync agreed", "sampler": "DistributedSampler"}
NAME = "ddp-sync-bench"


# -- one rank (under torchrun) -------------------------------------------------------


def parse_batch(lines):
    """Lines ``a,b,label`` (bytes) -> (x, y) tensors; the same collate for every loader."""
    import torch

    rows = torch.tensor([[float(v) for v in line.split(b",")] for line in lines])
    return rows[:, :2], rows[:, 2:]


class LinesDataset:
    """Map-style dataset of the files' lines: an index built up front, each line read with os.pread.

    pread, not seek + read: forked loader processes share the parent's file
    offsets, so a seek in one would move the others'.
    """

    def __init__(self, paths: list[str]):
        self.paths = paths
        self.index = []  # (file index, byte offset, length)
        for number, path in enumerate(paths):
            offset = 0
            with open(path, "rb") as handle:
                for line in handle:
                    self.index.append((number, offset, len(line) - 1))
                    offset += len(line)
        self._fds: dict[int, int] = {}
        self._pid = None

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        if self._pid != os.getpid():
            self._fds, self._pid = {}, os.getpid()
        number, offset, length = self.index[i]
        fd = self._fds.get(number)
        if fd is None:
            fd = self._fds[number] = os.open(self.paths[number], os.O_RDONLY)
        return os.pread(fd, length, offset)


def rank_main(args):
    import faulthandler

    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    from worker_sdk import WorkQueue
    from worker_sdk.torch import SyncLoader

    faulthandler.enable()  # a rank that aborts says where
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # and one killed at --run-timeout, where it hung
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    works = json.loads(Path(args.works_file).read_text())
    queue = sampler = None
    if args.mode == "sampler":
        dataset = LinesDataset(works)
        sampler = DistributedSampler(dataset, drop_last=True, seed=0)
        loader = DataLoader(
            dataset,
            batch_size=args.batch,
            sampler=sampler,
            num_workers=args.loaders,
            collate_fn=parse_batch,
            drop_last=True,
        )
    else:
        queue = WorkQueue(works, num_epochs=args.epochs, name=NAME, worker=f"rank{rank}")
        queue.job  # created (or attached to) here, outside the timed loop
        loader = SyncLoader(queue, batch_size=args.batch, num_workers=args.loaders, collate_fn=parse_batch)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    pause = args.step_ms / 1000.0
    profile = None
    if args.profile_rank and rank == 0:
        import cProfile

        profile = cProfile.Profile()
    steps = records = 0
    dist.barrier()
    began = time.perf_counter()
    cpu_began = time.process_time()  # every thread of the rank (its read-ahead, its heartbeat)
    # The server's and Postgres's CPU over the loop alone (job creation before it is not in the loop's way).
    service_began = service_cpu(args.server_group) if rank == 0 and args.server_group else 0.0
    if profile:
        profile.enable()
    edges = []  # per epoch: ms to its first batch, and from its last step to the loop's end
    for epoch in range(args.epochs):
        (sampler or loader).set_epoch(epoch)
        epoch_began = stepped = time.perf_counter()
        first = None
        for x, y in loader:
            if first is None:
                first = time.perf_counter() - epoch_began
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients here
            optimizer.step()
            if pause:
                time.sleep(pause)
            steps += 1
            records += len(y)
            stepped = time.perf_counter()
        edges.append(((first or 0.0) * 1000, (time.perf_counter() - stepped) * 1000))
    if profile:
        profile.disable()
    cpu = time.process_time() - cpu_began
    service = service_cpu(args.server_group) - service_began if rank == 0 and args.server_group else 0.0
    dist.barrier()
    seconds = time.perf_counter() - began
    # What sync agreed adds per step, alone: one all-reduce of one int.
    flag = torch.tensor([1])
    for _ in range(50):
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.allreduce_calls):
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    allreduce_us = (time.perf_counter() - start) / args.allreduce_calls * 1e6
    report = {"rank": rank, "world": world, "seconds": seconds, "steps": steps, "records": records, "cpu": cpu}
    report["service_cpu"] = service
    report["allreduce_us"] = allreduce_us
    report["edges_ms"] = edges
    Path(args.out, f"rank{rank}.json").write_text(json.dumps(report))
    if profile:
        import pstats

        profile.dump_stats(str(Path(args.out, "rank0.prof")))
        with open(Path(args.out, "profile.txt"), "w") as handle:
            pstats.Stats(profile, stream=handle).sort_stats("cumulative").print_stats(25)
    if queue is not None:
        queue.close()
    dist.barrier()  # no rank tears gloo down while another is still in a collective
    # The group's last reference must be this one, not the DDP model's: a
    # Reducer freed with the model joins gloo's threads holding the GIL, which
    # one of them waits for (the sampler's ranks hung there; the SDK's
    # ranks end their groups this way too, worker_sdk/collectives.py).
    group = dist.group.WORLD
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()
    del group


# -- the bench -----------------------------------------------------------------------


def write_files(folder: Path, files: int, lines: int) -> list[str]:
    rng = random.Random(2026)
    paths = []
    for i in range(files):
        path = folder / f"part-{i:03d}.csv"
        rows = []
        for _ in range(lines):
            a, b = rng.uniform(-1, 1), rng.uniform(-1, 1)
            rows.append(f"{a:.5f},{b:.5f},{int(a + b > 0)}\n")
        path.write_text("".join(rows))
        paths.append(str(path))
    return paths


def slices(paths: list[str], lines: int, per_file: int) -> list[str]:
    edges = [round(i * lines / per_file) for i in range(per_file + 1)]
    return [f"{path}?start={a}&end={b}" for path in paths for a, b in zip(edges, edges[1:])]


def torchrun(args, mode: str, works_file: Path, loaders: int, step_ms: float, env: dict, profile=False) -> dict:
    out = Path(tempfile.mkdtemp(prefix="shardline-ddp-sync-run-"))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "--monitor-interval=0.5",
        str(Path(__file__).resolve()),
        "--rank-main",
        "--mode",
        mode,
        "--works-file",
        str(works_file),
        "--batch",
        str(args.batch),
        "--loaders",
        str(loaders),
        "--step-ms",
        str(step_ms),
        "--epochs",
        str(args.epochs),
        "--allreduce-calls",
        str(args.allreduce_calls),
        "--out",
        str(out),
        "--server-group",
        str(args.server_group),
        *(["--profile-rank"] if profile else []),
    ]
    run_env = {**env, "SHARDLINE_RUN": uuid.uuid4().hex[:12]}
    done = run_group(command, run_env, args.run_timeout, out)
    ranks = [json.loads(path.read_text()) for path in sorted(out.glob("rank*.json"))]
    if len(ranks) < 2:
        raise RuntimeError(f"{mode} run failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    seconds = max(r["seconds"] for r in ranks)
    result = {
        "mode": mode,
        "seconds": seconds,
        "records": sum(r["records"] for r in ranks),
        "steps": [r["steps"] for r in ranks],
        "allreduce_us": [r["allreduce_us"] for r in ranks],
        # Per epoch, the slower rank's wait for its first batch plus its time from the last step to the loop's end.
        "edges_ms": [
            max(sum(rank_edges) for rank_edges in per_epoch) for per_epoch in zip(*(r["edges_ms"] for r in ranks))
        ],
        # CPU seconds per 1,000 records over the step loops: the ranks' own processes (every thread), and
        # the web server's and Postgres's processes (rank 0 reads them at the loop's ends).
        "rank_cpu": sum(r["cpu"] for r in ranks) / sum(r["records"] for r in ranks) * 1000,
        "service_cpu": sum(r["service_cpu"] for r in ranks) / sum(r["records"] for r in ranks) * 1000,
    }
    result["rate"] = result["records"] / seconds
    if done.returncode != 0:
        # Both ranks reported, so the loop was measured; what failed came after (teardown): counted, not hidden.
        errors = [line for line in done.stderr.splitlines() if "terminate" in line or "Error" in line]
        result["exit"] = f"exit {done.returncode}: {errors[0] if errors else done.stderr[-300:]}"
        print(f"  ({mode} run exited {done.returncode} after both ranks reported; its stderr: {out}/stderr.txt)")
    if profile:
        result["profile"] = (out / "profile.txt").read_text()
    return result


def run_group(command: list, env: dict, timeout: float, out: Path) -> subprocess.CompletedProcess:
    """Runs ``command``; past ``timeout`` it and every process whose command line names ``out`` are killed.

    subprocess.run's timeout kills torchrun alone, and torchrun starts each
    rank in a session of its own: a rank stuck in gloo's teardown outlived
    the bench and held its output pipe open. The output goes to files in
    ``out`` instead. Killed, the run's exit is -9 and what the ranks
    reported before still counts (see torchrun()).
    """
    with open(out / "stdout.txt", "w+") as stdout, open(out / "stderr.txt", "w+") as stderr:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=stdout, stderr=stderr, text=True)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stuck = [pid for pid in processes_naming(str(out)) if pid != process.pid]
            for pid in stuck:
                # Each rank and loader dumps its threads' stacks into stderr.txt
                # (rank_main registers the dump), one at a time: dumps written
                # at once into one file interleave.
                try:
                    os.kill(pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass
                time.sleep(0.3)  # no marker to wait on: the dump goes to the file read after the kill
            # Listed again: the ranks ran on while they dumped, and a new
            # epoch's DataLoader starts loader processes of its own.
            for pid in [process.pid, *processes_naming(str(out))]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait()
            stderr.write(f"\nkilled after {timeout:.0f} s (--run-timeout), after each process dumped its stacks")
        stdout.seek(0)
        stderr.seek(0)
        return subprocess.CompletedProcess(command, process.returncode, stdout.read(), stderr.read())


def service_cpu(server_group: int) -> float:
    """CPU seconds used so far by the web server's processes (its process group) and every Postgres process."""
    ticks = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        # fields[2] is the process group; fields[11:13] utime and stime (proc(5): fields 5, 14 and 15)
        if int(fields[2]) == server_group or name.startswith("postgres"):
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def processes_naming(text: str) -> list[int]:
    """The processes whose command line holds ``text`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue  # gone meanwhile
    return found


def bench(args):
    key = prepare("ddp sync bench")
    from django.conf import settings

    from tests.support import ServerProcess, database_url
    from worker_sdk import WorkQueue, sync

    server = ServerProcess(database_url(settings.DATABASES["default"]), workers=4).start()
    args.server_group = server.process.pid  # started in a session of its own
    began = time.time()
    folder = Path(tempfile.mkdtemp(prefix="shardline-ddp-sync-"))
    paths = write_files(folder, args.files, args.lines)
    works = {"planned": slices(paths, args.lines, args.slices_per_file), "agreed": paths, "sampler": paths}
    files = {}
    for mode, listed in works.items():
        files[mode] = folder / f"{mode}.json"
        files[mode].write_text(json.dumps(listed))
    env = {
        **os.environ,
        "SHARDLINE_URL": server.url,
        "SHARDLINE_TOKEN": key,
        # The project first, then whatever the caller's path held (packages installed with --target).
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "OMP_NUM_THREADS": "1",
    }
    per_epoch = args.files * args.lines
    try:
        # The explicit slices must give the planned runs their steps up front (no Celery slicing involved).
        for mode in ("planned", "agreed"):
            probe = WorkQueue(
                works[mode],
                num_epochs=args.epochs,
                name=NAME,
                url=server.url,
                token=key,
                run=f"probe-{mode}-{uuid.uuid4().hex[:8]}",
            )
            plan = sync.plan(probe, 0, args.batch, 2)
            print(f"{MODES[mode]}: {len(works[mode])} works, epoch 0 unread {plan.unread}, steps {plan.steps}")
            probe.close()
        print(
            f"{args.files} files x {args.lines} lines = {per_epoch} records per epoch, {args.epochs} epochs, "
            f"2 ranks, batch {args.batch} per rank; {args.repeats} runs per loader and configuration",
            flush=True,
        )
        results = {}
        agreed_us = []
        for step_ms in args.step_ms:
            for loaders in args.loaders:
                runs = {mode: [] for mode in MODES}
                order = list(MODES)
                for repeat in range(args.repeats):
                    for mode in order[repeat % 3 :] + order[: repeat % 3]:
                        result = torchrun(args, mode, files[mode], loaders, step_ms, env)
                        runs[mode].append(result)
                        agreed_us += result["allreduce_us"]
                results[(step_ms, loaders)] = runs
                print_table(step_ms, loaders, runs, args)
        allreduce = statistics.median(agreed_us)
        print(
            f"one all-reduce (MIN) of a one-element int tensor, gloo, 2 ranks: median {allreduce:.0f} us per call "
            f"({args.allreduce_calls} calls per rank after each of {len(agreed_us) // 2} runs; "
            f"range {min(agreed_us):.0f}-{max(agreed_us):.0f} us)"
        )
        for (step_ms, loaders), runs in results.items():
            step_us = statistics.median(r["seconds"] / max(r["steps"]) for r in runs["sampler"]) * 1e6
            print(
                f"  step-ms {step_ms:g}, loaders {loaders}: a DistributedSampler step takes {step_us:.0f} us "
                f"(median); the all-reduce is {allreduce / step_us:.1%} of it"
            )
        failed = [r["exit"] for runs in results.values() for rs in runs.values() for r in rs if "exit" in r]
        if failed:
            print(
                f"{len(failed)} of {len(results) * 3 * args.repeats} torchruns exited nonzero after both ranks had "
                f"reported (after the timed loop and the all-reduces): {sorted(set(failed))}"
            )
        for mode in args.profile:
            result = torchrun(args, mode, files[mode], 0, 0.0, env, profile=True)
            print(f"\nprofile of rank 0, {MODES[mode]}, loaders 0, step-ms 0 ({result['rate']:.0f} records/s):")
            print(trim_profile(result["profile"]))
    finally:
        server.stop()
    print(
        f"machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}; torch {torch_version()}; "
        f"{time.time() - began:.0f} s"
    )


def print_table(step_ms, loaders, runs, args):
    base = statistics.median(r["rate"] for r in runs["sampler"])
    print(f"\nstep-ms {step_ms:g}, loader workers {loaders}:")
    print(
        f"  {'loader':<19} {'records/s per run':<28} {'median':>8} {'steps/rank':>11} {'vs sampler':>11}"
        f" {'rank CPU':>9} {'service CPU':>12} {'edges':>9}"
    )
    for mode, label in MODES.items():
        rates = [r["rate"] for r in runs[mode]]
        median = statistics.median(rates)
        steps = sorted({s for r in runs[mode] for s in r["steps"]})
        steps_cell = "/".join(str(s) for s in steps)
        per_run = " ".join(f"{rate:8.0f}" for rate in rates)
        rank_cpu = statistics.median(r["rank_cpu"] for r in runs[mode])
        service = statistics.median(r["service_cpu"] for r in runs[mode])
        edges = statistics.median(ms for r in runs[mode] for ms in r["edges_ms"])
        print(
            f"  {label:<19} {per_run:<28} {median:8.0f} {steps_cell:>11} {median / base:10.2f}x"
            f" {rank_cpu * 1000:6.0f} ms {service * 1000:9.0f} ms {edges:6.0f} ms",
            flush=True,
        )
    print("  (CPU: milliseconds per 1,000 records trained over the step loops, the median run; rank: both ranks'")
    print("  own processes, every thread, loader processes not included; service: the web server and Postgres;")
    print("  edges: per epoch, the wait for its first batch plus the time from its last step to the loop's end,")
    print("  the slower rank's, median over every epoch of every run)")


def trim_profile(text: str) -> str:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("ncalls")), 0)
    return "\n".join(lines[start:])


def torch_version() -> str:
    try:
        import torch

        return torch.__version__
    except ImportError:
        return "?"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--lines", type=int, default=2000, help="lines per file")
    parser.add_argument("--slices-per-file", type=int, default=4, help="explicit slices per file (sync planned)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32, help="batch size per rank")
    parser.add_argument("--loaders", default="0,2", help="loader processes per rank (num_workers), comma-separated")
    parser.add_argument("--step-ms", default="0,5", help="sleep per step (ms), comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--allreduce-calls", type=int, default=1000)
    parser.add_argument("--profile", default="", help="loaders to profile once more (planned,agreed,sampler)")
    parser.add_argument("--run-timeout", type=float, default=180)
    # One rank's side (torchrun starts this file with these).
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=list(MODES), help=argparse.SUPPRESS)
    parser.add_argument("--works-file", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--server-group", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--profile-rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_main:
        args.loaders, args.step_ms = int(args.loaders), float(args.step_ms)
        rank_main(args)
        return
    args.loaders = [int(n) for n in args.loaders.split(",")]
    args.step_ms = [float(n) for n in args.step_ms.split(",")]
    args.profile = [m for m in args.profile.split(",") if m]
    bench(args)


if __name__ == "__main__":
    main()
