"""A worker process that reads a Postgres table job with the SDK and prints the id of every row it reads.

    python tests/slicing/table_reader.py --name NAME --slices N --worker W WORK

It attaches to the job that the test created (same name, works, slicing and
run), reads each leased slice with ``WorkQueue.ranges()`` and
``work.records()`` (each row claimed before it is handed on, so the liquid
tail may split a slice it reads), and prints ``id <value>`` per row.
"""

import argparse

from worker_sdk import WorkQueue


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--slices", type=int, required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("work")
    args = parser.parse_args()
    queue = WorkQueue([args.work], shuffle=False, num_slices=args.slices, name=args.name, worker=args.worker)
    out = []
    for work in queue.ranges():
        out += [f"id {row['id']}\n" for row in work.records()]
    queue.close()
    print("".join(out), end="", flush=True)


if __name__ == "__main__":
    main()
