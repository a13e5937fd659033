"""A worker process for the chaos tests: prints what it starts and finishes, with wall-clock times.

Lines: ``<time> start <epoch-less item>`` / ``<time> done <item>`` / ``<time> finished``,
flushed, so a test can tell which item a killed worker held and when another
worker began it.
"""

import argparse
import sys
import time

from worker_sdk import WorkQueue


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--cost", type=float, default=0.0)
    parser.add_argument("--name", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--lease-timeout", type=float, default=None)
    parser.add_argument("--max-attempts", type=int, default=100)
    parser.add_argument("--look-ahead", type=int, default=0)
    args = parser.parse_args()
    queue = WorkQueue(
        [f"/items/{i:04d}" for i in range(args.items)],
        num_epochs=args.epochs,
        shuffle=False,
        name=args.name,
        worker=args.worker,
        lease_timeout=args.lease_timeout,
        max_attempts=args.max_attempts,
        look_ahead=args.look_ahead,
    )
    for item in queue.items():
        print(f"{time.time():.3f} start {item}", flush=True)
        time.sleep(args.cost)  # the item's work: the window a kill falls in
        print(f"{time.time():.3f} done {item}", flush=True)
    print(f"{time.time():.3f} finished", flush=True)


if __name__ == "__main__":
    sys.exit(main())
