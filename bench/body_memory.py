"""Memory of a web process around large request bodies (issue 25: bodies bounded, memory given back).

Usage:  DATABASE_URL=... .venv/bin/python bench/body_memory.py [--mb 200] [--concurrent 3] [--rounds 2]

Starts the server as `make run` serves it (gunicorn + uvicorn over server.asgi)
with one web process, so every body lands in it, and sends --concurrent job
creations of --mb MB at once, --rounds times: a works list that is parsed
whole and then refused (an unknown field), so nothing is written. Prints the
web process's RSS before, at its peak, and 3 s after each round's answers;
then the same bodies to a take (the small limit: refused unread, 413).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from _env import prepare  # first: it sets up the project


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    key = prepare("body memory bench")
    import psutil
    import requests
    from django.conf import settings

    from tests.support import ServerProcess, database_url

    server = ServerProcess(database_url(settings.DATABASES["default"]), workers=1).start()
    try:
        (web,) = psutil.Process(server.process.pid).children()
        mb = lambda: web.memory_info().rss / 2**20  # noqa: E731
        work = "/" + "d" * 198
        count = args.mb * 2**20 // (len(work) + 3)
        body = json.dumps({"name": "bench-bodies", "works": [work] * count, "refused_field": True}).encode()
        headers = {"Authorization": f"Token {key}", "Content-Type": "application/json"}
        job = requests.post(
            f"{server.url}/api/v1/jobs/", json={"name": "bench-bodies", "works": ["/a"]}, headers=headers
        )
        take = f"{server.url}/api/v1/jobs/{job.json()['id']}/leases/"
        print(f"body {len(body) / 2**20:.0f} MB x {args.concurrent} concurrent; web process RSS before: {mb():.0f} MB")
        for target, url in (("job create", f"{server.url}/api/v1/jobs/"), ("take", take)):
            for round_ in range(args.rounds):
                peak, done = [mb()], threading.Event()

                def sample():
                    while not done.is_set():
                        peak.append(mb())
                        time.sleep(0.02)

                sampler = threading.Thread(target=sample)
                sampler.start()
                began = time.perf_counter()
                with ThreadPoolExecutor(args.concurrent) as pool:
                    statuses = list(
                        pool.map(
                            lambda _: requests.post(url, data=body, headers=headers).status_code, range(args.concurrent)
                        )
                    )
                elapsed = time.perf_counter() - began
                done.set()
                sampler.join()
                time.sleep(3)
                print(
                    f"{target}, round {round_ + 1}: answers {sorted(set(statuses))} in {elapsed:.1f} s; "
                    f"RSS peak {max(peak):.0f} MB, 3 s after {mb():.0f} MB"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
