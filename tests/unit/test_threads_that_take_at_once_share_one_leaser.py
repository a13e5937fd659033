"""Threads that make a queue's first take at the same moment (dataset()'s interleave slots) share one leaser."""

import threading

from worker_sdk import WorkQueue
from worker_sdk.client import Client


class JobOnlyClient(Client):
    """Answers the job's creation; nothing else is asked of it here."""

    def __init__(self):
        pass

    def create_job(self, spec):
        return {"id": 7, "name": spec["name"], "state": "ready", "lease_timeout": 600.0}

    def close(self):
        pass


def test_eight_threads_starting_at_once_get_the_same_leaser():
    queue = WorkQueue(["/a", "/b"], client=JobOnlyClient(), worker="w")
    start = threading.Barrier(8)
    leasers = []

    def first_take():
        start.wait()
        leasers.append(queue._leaser())

    threads = [threading.Thread(target=first_take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    try:
        assert len(leasers) == 8 and len({id(leaser) for leaser in leasers}) == 1
    finally:
        for leaser in {id(leaser): leaser for leaser in leasers}.values():
            leaser.stop()
