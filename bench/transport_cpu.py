"""The SDK's CPU per request: its transport on urllib3 beside the requests.Session it used before, in one run.

Usage:  .venv/bin/python bench/transport_cpu.py [--requests 500] [--rounds 5]

A training process sends a request for about every item it reads (a take,
a heartbeat), on the cores its training loop needs. This times the client's
side alone (time.process_time of this process: building the request,
sending, parsing the answer), against the ASGI server of tests/support.py
(4 web processes; DATABASE_URL when set, else the embedded Postgres):

  requests   a requests.Session with the SDK's headers, as worker_sdk.transport sent before
  sdk        worker_sdk.transport.Transport.request (urllib3, one pool per process)

Each sends --requests GETs of /healthz (with the SDK's token header; a
small JSON answer, the server's cheapest, so that the client's own work is
most of what is timed) per round; the two alternate for --rounds rounds.
Prints each one's median CPU and wall microseconds per request and the
ratio sdk / requests. A larger answer adds the same JSON parsing to both.
"""

from __future__ import annotations

import argparse
import statistics
import time

import _env  # noqa: F401  (first: it sets up the project)
from _env import serve


def timed(send, count: int) -> tuple[float, float]:
    """(CPU, wall) microseconds per request over ``count`` requests."""
    send()  # a connection in the pool first
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        send()
    return (time.process_time() - cpu) / count * 1e6, (time.perf_counter() - wall) / count * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import requests

    from worker_sdk.transport import Transport

    server, key = serve("transport cpu bench")
    try:
        path, params = "/healthz", None
        session = requests.Session()
        session.headers.update({"User-Agent": "shardline-worker-sdk", "Authorization": f"Token {key}"})
        transport = Transport(server.url, key)

        def old():
            response = session.request("GET", server.url + path, params=params, timeout=30)
            response.raise_for_status()
            return response.json()

        def new():
            return transport.request("GET", path, params=params)

        assert old() == new()  # the same answer both ways
        results = {"requests": [], "sdk": []}
        for round_ in range(args.rounds):
            order = [("requests", old), ("sdk", new)]
            for name, send in order if round_ % 2 == 0 else order[::-1]:
                results[name].append(timed(send, args.requests))
        print(f"{args.requests} GETs of {path} per round, {args.rounds} rounds, the two alternating; medians:")
        print(f"  {'client':<10} {'CPU us/request':>15} {'wall us/request':>16}")
        medians = {}
        for name, runs in results.items():
            medians[name] = statistics.median(c for c, _w in runs), statistics.median(w for _c, w in runs)
            print(f"  {name:<10} {medians[name][0]:15.0f} {medians[name][1]:16.0f}")
        print(
            f"  sdk / requests: CPU {medians['sdk'][0] / medians['requests'][0]:.2f}x, "
            f"wall {medians['sdk'][1] / medians['requests'][1]:.2f}x"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
