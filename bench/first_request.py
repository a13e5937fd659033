"""A web process's first request, with and without the server's warm-up at start (server.urls.warm).

Usage:  .venv/bin/python bench/first_request.py [--connections 24] [--repeats 3]

Starts the ASGI server of tests/support.py (gunicorn, 4 uvicorn workers) as
the project serves it (server.asgi), and beside it the same server without
the warm-up (bench/cold_asgi.py), in turns. Against each fresh server it
opens --connections new connections, one after another; each sends an
authenticated GET /api/v1/jobs/ and then a second one on the same
connection. The kernel spreads the connections over the processes, so the
first few meet processes that have served nothing (the healthz check that
starts the server reaches one). Prints the slowest and the median first
request and the median second one, per server, in milliseconds. Uses
DATABASE_URL when set, else the embedded Postgres.
"""

from __future__ import annotations

import argparse
import statistics
import time

import _env  # noqa: F401  (first: it sets up the project)
import requests
from _env import serve

from tests.support import ServerProcess


def measure(url: str, key: str, connections: int) -> tuple[list[float], list[float]]:
    firsts, seconds = [], []
    for _ in range(connections):
        with requests.Session() as session:
            session.headers["Authorization"] = f"Token {key}"
            for into in (firsts, seconds):
                began = time.perf_counter()
                response = session.get(url + "/api/v1/jobs/", timeout=30)
                into.append((time.perf_counter() - began) * 1000)
                response.raise_for_status()
    return firsts, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    server, key = serve("first-request")
    db_url = server.env["DATABASE_URL"]
    server.stop()
    print(f"{'server':<8} {'run':>3} {'first max':>10} {'first p50':>10} {'second p50':>11}  (ms)")
    for repeat in range(args.repeats):
        for name, app in (("warm", "server.asgi"), ("cold", "bench.cold_asgi")):
            server = ServerProcess(db_url, workers=4, app=app).start()
            try:
                firsts, seconds = measure(server.url, key, args.connections)
            finally:
                server.stop()
            print(
                f"{name:<8} {repeat:>3} {max(firsts):>10.1f} {statistics.median(firsts):>10.1f}"
                f" {statistics.median(seconds):>11.1f}"
            )


if __name__ == "__main__":
    main()
