"""A DataLoader loader process's full garbage collection, with and without what it inherited frozen.

Usage:  .venv/bin/python bench/loader_gc.py [--rounds 3] [--loaders 2] [--import tensorflow]

The training process imports PyTorch (and --import's modules, as a script
would), then reads one job of item strings through
``DataLoader(WorkQueueDataset(queue, reader=probe, gc_freeze=...), num_workers=--loaders)``,
forked loaders, the ASGI server of tests/support.py. Each loader's reader
runs one full collection (``gc.collect()``, what the collector does by
itself once enough has been allocated) and reports:

  seconds      how long the collection took
  copied MB    how much of the loader's memory the collection made its own
               (Private_Dirty of /proc/self/smaps_rollup, after less
               before): pages it wrote to that the fork had shared with
               the training process

Arms alternate (gc_freeze=True, the SDK's default, and False) for --rounds
rounds, side by side in one run; prints each arm's medians over every
loader of every round, and the ratio frozen / not frozen. Linux only
(smaps_rollup). Uses DATABASE_URL when set, else the embedded Postgres.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import statistics
import sys
import time
import uuid

import _env  # noqa: F401  (first: it sets up the project)
from _env import serve


def private_dirty_kb() -> int:
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1])
    raise RuntimeError("no Private_Dirty in /proc/self/smaps_rollup")


def probe(item: str):
    """In a loader: one full collection, timed, and the memory it made the loader's own."""
    before = private_dirty_kb()
    began = time.perf_counter()
    gc.collect()
    seconds = time.perf_counter() - began
    yield (seconds, (private_dirty_kb() - before) / 1024, gc.get_freeze_count())


def run(server, key, loaders: int, frozen: bool) -> list[tuple[float, float, int]]:
    from torch.utils.data import DataLoader

    from worker_sdk import WorkQueue
    from worker_sdk.torch import WorkQueueDataset

    queue = WorkQueue(
        [f"/gc/{i}" for i in range(loaders)],
        name=f"loader-gc-{uuid.uuid4().hex[:8]}",
        url=server.url,
        token=key,
    )
    queue.job  # noqa: B018  (created before the loaders fork)
    dataset = WorkQueueDataset(queue, reader=probe, gc_freeze=frozen)
    found = list(DataLoader(dataset, batch_size=None, num_workers=loaders, multiprocessing_context="fork"))
    queue.close()
    return [(float(seconds), float(copied), int(count)) for seconds, copied, count in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loaders", type=int, default=2)
    parser.add_argument("--import", dest="modules", default="", help="modules the training process imports too")
    args = parser.parse_args()
    if args.rounds < 1 or args.loaders < 1:
        parser.error("--rounds and --loaders must be at least 1")

    import torch  # noqa: F401  (the training process's heap, as a script's)

    for module in filter(None, args.modules.split(",")):
        importlib.import_module(module)
    server, key = serve("loader gc bench")
    gc.collect()  # the training process's own first full collection, before its loaders fork
    print(
        f"training process: {len(gc.get_objects())} objects tracked; {args.loaders} forked loaders, "
        f"{args.rounds} rounds; each loader's one full collection:",
        flush=True,
    )
    results: dict[bool, list[tuple[float, float, int]]] = {True: [], False: []}
    try:
        for round_ in range(args.rounds):
            for frozen in (True, False) if round_ % 2 == 0 else (False, True):
                results[frozen] += run(server, key, args.loaders, frozen)
    finally:
        server.stop()
    print(f"  {'gc_freeze':>9}  {'seconds (median)':>16}  {'copied MB (median)':>18}  {'frozen objects':>14}")
    medians = {}
    for frozen in (True, False):
        seconds = statistics.median(r[0] for r in results[frozen])
        copied = statistics.median(r[1] for r in results[frozen])
        medians[frozen] = (seconds, copied)
        count = statistics.median(r[2] for r in results[frozen])
        print(f"  {str(frozen):>9}  {seconds:16.3f}  {copied:18.1f}  {count:14.0f}")
    (seconds_on, copied_on), (seconds_off, copied_off) = medians[True], medians[False]
    print(
        f"  frozen / not frozen: {seconds_on / seconds_off:.3f}x the time"
        + (f", {copied_on / copied_off:.3f}x the memory copied" if copied_off > 0 else "")
    )
    print(f"machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
