"""A worker process for the SDK tests: reads a queue's items, one per `--cost` seconds.

Prints each item as it finishes it (flushed), so a test can see progress and
kill the process mid-item. With `--works` (a JSON list of record ranges) it
reads them through `ranges()`: each range's cost comes before its records,
which it prints as it reads them.
"""

import argparse
import json
import sys
import time

from worker_sdk import WorkQueue


def work(seconds: float) -> None:
    """``seconds`` of work in 10-ms steps: a process stopped (SIGSTOP) meanwhile still has the rest to do."""
    left = seconds
    while left > 0:
        step = min(0.01, left)
        time.sleep(step)
        left -= step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--cost", type=float, default=0.0)
    parser.add_argument("--first-cost", type=float, default=None, help="the first item's cost (default --cost)")
    parser.add_argument("--name", default="sdk_workers")
    parser.add_argument("--worker", required=True)
    parser.add_argument("--lease-timeout", type=float, default=None)
    parser.add_argument("--look-ahead", type=int, default=0)
    parser.add_argument("--works", default=None, help="a JSON list of works, read with ranges()")
    args = parser.parse_args()
    if args.works is not None:
        return read_ranges(args)
    queue = WorkQueue(
        [f"/items/{i:04d}" for i in range(args.items)],
        shuffle=False,
        name=args.name,
        worker=args.worker,
        lease_timeout=args.lease_timeout,
        look_ahead=args.look_ahead,
    )
    for index, item in enumerate(queue.items()):
        print(f"start {item}", flush=True)
        work(args.cost if index or args.first_cost is None else args.first_cost)
        print(f"done {item}", flush=True)
    print("finished", flush=True)


def read_ranges(args) -> None:
    queue = WorkQueue(
        json.loads(args.works), shuffle=False, name=args.name, worker=args.worker, look_ahead=args.look_ahead
    )
    for index, leased in enumerate(queue.ranges()):
        print(f"start {leased.item}", flush=True)
        work(args.cost if index or args.first_cost is None else args.first_cost)
        for record in leased.records():
            print(f"record {record.decode().strip()}", flush=True)
        print(f"done {leased.item}", flush=True)
    print("finished", flush=True)


if __name__ == "__main__":
    sys.exit(main())
