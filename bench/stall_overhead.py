"""The data-stall meter's cost on the hot path: records through a plain generator and through it, in one run.

Usage:  .venv/bin/python bench/stall_overhead.py [--records 1000000] [--rounds 5]

Every record a consumer shape hands to the training loop passes the meter
(worker_sdk.stall): a monotonic-clock read as the loop asks for the next one
and another as it gets it. Each round times the same generator of --records
integers read bare and read through ``stall.timed`` (the wrapper the shapes
use), in turn, so the machine's noise falls on both alike. Prints each round,
the best nanoseconds per record of each and the difference.
"""

from __future__ import annotations

import argparse
import time

from worker_sdk import stall


def per_record(records: int, wrap) -> float:
    began = time.perf_counter()
    for _ in wrap(iter(range(records))):
        pass
    return (time.perf_counter() - began) / records * 1e9


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    clock = stall.Clock()
    plain, metered = [], []
    for round_ in range(args.rounds):
        plain.append(per_record(args.records, lambda it: it))
        metered.append(per_record(args.records, lambda it: stall.timed(it, stall.Meter(lambda: clock))))
        print(f"round {round_ + 1}: plain {plain[-1]:.0f} ns/record, metered {metered[-1]:.0f} ns/record")
    best_plain, best_metered = min(plain), min(metered)
    print(
        f"best: plain {best_plain:.0f} ns/record, metered {best_metered:.0f} ns/record, "
        f"the meter {best_metered - best_plain:.0f} ns/record"
    )


if __name__ == "__main__":
    main()
