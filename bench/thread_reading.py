"""Reading records on a thread of their own against reading them on the training thread, in one process.

Usage:  .venv/bin/python bench/thread_reading.py [--batches 1500] [--cost-us 3,9]

A step loop (a 2-8-1 model's forward, backward and SGD step on a batch of
32, no data-parallel group, no server) over a source that spins --cost-us
microseconds per record, standing in for per-record reading and claiming
in Python. Inline: the loop pulls each batch itself. Thread:
``worker_sdk.ahead.Ahead`` reads two batches ahead on a thread (what
SyncLoader did without loader processes before it read on the training
thread). Printed: batches/s of each and thread / inline, at the
interpreter's default switch interval (5 ms) and at 0.5 ms.
"""

from __future__ import annotations

import argparse
import sys
import time

from _env import ROOT  # noqa: F401  (first: it sets up the project)

from worker_sdk.ahead import Ahead

BATCH = 32


def source(batches: int, cost_us: float):
    import torch

    for _ in range(batches):
        for _record in range(BATCH):
            until = time.perf_counter() + cost_us / 1e6
            while time.perf_counter() < until:
                pass
        yield torch.randn(BATCH, 2), torch.rand(BATCH, 1)


def steps_per_second(batches) -> float:
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    began, steps = time.perf_counter(), 0
    for x, y in batches:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
    return steps / (time.perf_counter() - began)


def main():
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1500)
    parser.add_argument("--cost-us", default="3,9", help="spin per record (us), comma-separated")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{'cost/record':>11} {'switch':>7} {'inline b/s':>11} {'thread b/s':>11} {'thread/inline':>14}")
    for cost in [float(c) for c in args.cost_us.split(",")]:
        for interval in (0.005, 0.0005):
            sys.setswitchinterval(interval)
            inline = steps_per_second(source(args.batches, cost))
            thread = steps_per_second(Ahead(source(args.batches, cost), depth=2))
            print(f"{cost:9.0f}us {interval * 1e3:5.1f}ms {inline:11.0f} {thread:11.0f} {thread / inline:13.2f}x")
    print(f"machine: Python {sys.version.split()[0]}; torch {torch.__version__}")


if __name__ == "__main__":
    main()
