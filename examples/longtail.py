"""The long tail, live: N worker processes share one Shardline job; one is slower.

    SHARDLINE_URL=http://localhost:8000 SHARDLINE_TOKEN=... \
        .venv/bin/python examples/longtail.py --workers 4 --items 80 --slow-factor 4

Each worker "processes" an item by sleeping --cost seconds (times
--slow-factor for worker 0). With static sharding every worker would get
items/N and the slow one would finish last, --slow-factor times later; here
each worker takes the next item when it is ready, so the slow one takes fewer.
Prints how many items each worker took and when each finished its last item.
"""

import argparse
import multiprocessing
import os
import time
import uuid

from worker_sdk import WorkQueue


def work(index, args, run, results):
    queue = WorkQueue(
        [f"/longtail/item-{i:04d}" for i in range(args.items)],
        shuffle=False,
        name="longtail",
        run=run,
        worker=f"worker-{index}",
    )
    cost = args.cost * (args.slow_factor if index == 0 else 1)
    taken, last_done = 0, time.time()
    for _item in queue.items():
        time.sleep(cost)
        taken += 1
        last_done = time.time()
    results.put((index, taken, last_done))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--items", type=int, default=80)
    parser.add_argument("--cost", type=float, default=0.05, help="seconds per item for a normal worker")
    parser.add_argument("--slow-factor", type=float, default=4.0)
    args = parser.parse_args()
    run = os.environ.get("SHARDLINE_RUN") or uuid.uuid4().hex[:8]
    results = multiprocessing.Queue()
    # Attach first, so that job creation is not part of the measured time.
    WorkQueue([f"/longtail/item-{i:04d}" for i in range(args.items)], shuffle=False, name="longtail", run=run).job
    start = time.time()
    processes = [multiprocessing.Process(target=work, args=(i, args, run, results)) for i in range(args.workers)]
    for process in processes:
        process.start()
    rows = sorted(results.get() for _ in processes)
    for process in processes:
        process.join()
    total_speed = (args.workers - 1) + 1 / args.slow_factor
    ideal = args.items * args.cost / total_speed
    static = (args.items / args.workers) * args.cost * args.slow_factor
    for index, taken, finished in rows:
        label = " (slow)" if index == 0 else ""
        print(f"worker {index}{label}: {taken} items, last one done at {finished - start:.2f}s")
    print(
        f"makespan {max(r[2] for r in rows) - start:.2f}s; ideal {ideal:.2f}s; static sharding would take {static:.2f}s"
    )


if __name__ == "__main__":
    main()
