"""A training process of the data-stall test: reads a job's items through a reader of one pace and a model of another.

Prints ``attached <job id>`` once its job exists (flushed), then reads until
the job ends or it is stopped: each record costs ``--read`` seconds in the
reader (the SDK's ``records()``) and ``--compute`` in the model.
"""

import argparse
import time

from worker_sdk import WorkQueue


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--read", type=float, required=True)
    parser.add_argument("--compute", type=float, required=True)
    parser.add_argument("works", nargs="+")
    args = parser.parse_args()
    queue = WorkQueue(args.works, shuffle=False, name=args.name, run=args.run, worker=args.worker)
    print("attached", queue.job["id"], flush=True)

    def reader(lease):
        with open(lease.item) as handle:
            for line in handle:
                time.sleep(args.read)  # the reader's pace: the condition under test
                yield line

    for work in queue.ranges():
        for _record in work.records(reader):
            time.sleep(args.compute)  # the model's work on a record
    queue.close()
    print("finished", flush=True)


if __name__ == "__main__":
    main()
