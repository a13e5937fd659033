"""SIGKILL the Celery worker in the middle of slicing: the job still becomes ready, with no duplicate items."""

import os
import signal
import uuid

import pytest

from ..conftest import start_celery_worker
from ..support import Api, ServerProcess, wait_until
from .conftest import drain
from .data import write_tfrecord


@pytest.fixture
def own_queue(monkeypatch):
    # Its own queue, server and workers: no other worker of the session may take the task.
    monkeypatch.setenv("SHARDLINE_CELERY_QUEUE", f"shardline-kill-{uuid.uuid4().hex[:8]}")


def test_the_task_runs_again_and_installs_the_slices_once(own_queue, test_database_url, live_keys, tmp_path):
    # Ten links to one 150,000-record TFRecord file: walking 1.5 million record
    # headers takes the worker several seconds, long enough to kill it mid-way.
    source = write_tfrecord(tmp_path / "source.tfrecord", 150_000)
    for index in range(10):
        os.symlink(source, tmp_path / f"shard-{index:02d}.tfrecord")

    server = ServerProcess(test_database_url, workers=2).start()
    first = start_celery_worker(test_database_url, "doomed")
    second = None
    try:
        api = Api(server.url, live_keys["worker"])
        body = {
            "name": f"kill-{uuid.uuid4().hex[:8]}",
            "works": [str(tmp_path / "shard-*.tfrecord")],
            "num_slices": 50,
            "shuffle": False,
        }
        job = api.post("/api/v1/jobs/", body).json()

        def counting():
            progress = api.get(f"/api/v1/jobs/{job['id']}/").json()["slicing_progress"]
            return progress.get("records_counted", 0) > 0

        wait_until(counting, 60, 0.05, "the first worker to be counting records")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        assert api.get(f"/api/v1/jobs/{job['id']}/").json()["state"] == "slicing"

        second = start_celery_worker(test_database_url, "rescuer")
        ready = wait_until(
            lambda: (lambda j: j if j["state"] != "slicing" else None)(api.get(f"/api/v1/jobs/{job['id']}/").json()),
            120,
            0.2,
            "the second worker to finish slicing",
        )
        assert ready["state"] == "ready", ready["error"]
        assert ready["units_count"] == 50

        items = [item for item, _offset in drain(api, job["id"])]
        assert len(items) == len(set(items)) == 50
        per_file = {}
        for item in items:
            path, _, query = item.rpartition("?")
            start, end = (int(part.split("=")[1]) for part in query.split("&"))
            per_file.setdefault(path, []).append((start, end))
        for spans in per_file.values():
            spans.sort()
            assert spans[0][0] == 0 and spans[-1][1] == 150_000
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    finally:
        for worker in (first, second):
            if worker is not None and worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
        server.stop()
