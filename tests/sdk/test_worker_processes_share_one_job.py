"""Real worker processes against a real server: sharing, a SIGKILL mid-item, a server restart."""

import os
import signal
import subprocess
import sys
from collections import Counter

import pytest

from tests.support import ROOT, ServerProcess, wait_until


def start_worker(env, worker, items, cost, name="sdk_workers", lease_timeout=None, first_cost=None, look_ahead=0):
    args = [
        sys.executable,
        "tests/sdk/sdk_worker.py",
        "--items",
        str(items),
        "--cost",
        str(cost),
        "--worker",
        worker,
        "--name",
        name,
    ]
    if lease_timeout is not None:
        args += ["--lease-timeout", str(lease_timeout)]
    if first_cost is not None:
        args += ["--first-cost", str(first_cost)]
    if look_ahead:
        args += ["--look-ahead", str(look_ahead)]
    return subprocess.Popen(
        args,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished_items(output: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in output.splitlines() if line.startswith("done ")]


def test_four_workers_read_every_item_once_and_the_slow_one_reads_fewer(sdk_env):
    workers = [start_worker(sdk_env, f"w{i}", 60, 0.16 if i == 0 else 0.04) for i in range(4)]
    outputs = [w.communicate(timeout=120)[0] for w in workers]
    assert all(w.returncode == 0 for w in workers)
    per_worker = [finished_items(out) for out in outputs]
    counts = Counter(item for items in per_worker for item in items)
    assert len(counts) == 60 and set(counts.values()) == {1}
    slow, fast = len(per_worker[0]), [len(items) for items in per_worker[1:]]
    assert slow < min(fast), (slow, fast)


def test_a_killed_workers_item_is_read_by_another_after_the_lease_timeout(sdk_env, live_api):
    victim = start_worker(sdk_env, "victim", 6, 30, lease_timeout=2)
    first_line = victim.stdout.readline()
    assert first_line.startswith("start /items/0000"), first_line
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)

    survivor = start_worker(sdk_env, "survivor", 6, 0.0, lease_timeout=2)
    out, err = survivor.communicate(timeout=60)
    assert survivor.returncode == 0, err
    assert sorted(finished_items(out)) == [f"/items/{i:04d}" for i in range(6)]

    queue_id = next(
        j["id"]
        for j in live_api("viewer").get("/api/v1/jobs/?page_size=500").json()["results"]
        if j["name"] == f"sdk_workers.{sdk_env['SHARDLINE_RUN']}"
    )
    rows = {r["item"]: r for r in live_api("viewer").get(f"/api/v1/jobs/{queue_id}/items/").json()["results"]}
    killed = rows["/items/0000"]
    assert (killed["state"], killed["worker"], killed["attempts"]) == ("done", "survivor", 2)
    assert all(r["state"] == "done" for r in rows.values())


@pytest.fixture
def own_server(test_database_url):
    server = ServerProcess(test_database_url, workers=2).start()
    yield server
    server.stop()


def test_a_server_restart_mid_run_loses_nothing(own_server, sdk_env):
    env = {**sdk_env, "SHARDLINE_URL": own_server.url}
    worker = start_worker(env, "steady", 40, 0.1)
    wait_until(
        lambda: worker.stdout.readline().startswith("done /items/0005"), 30, message="progress before the restart"
    )
    own_server.kill()
    restarted = ServerProcess(own_server.env["DATABASE_URL"], workers=2)
    restarted.port, restarted.url = own_server.port, own_server.url
    restarted.start()
    try:
        out, err = worker.communicate(timeout=90)
        assert worker.returncode == 0, err
        assert "finished" in out
        assert "retrying" in err  # the worker really met the dead server
        from worker_sdk.client import Client
        from worker_sdk.transport import Transport

        client = Client(Transport(own_server.url, env["SHARDLINE_TOKEN"]))
        job = client.create_job(
            {
                "name": f"sdk_workers.{env['SHARDLINE_RUN']}",
                "works": [f"/items/{i:04d}" for i in range(40)],
                "shuffle": False,
            }
        )
        marks = client.watermarks(job["id"])
        assert (marks["done"], marks["pending"], marks["leased"], marks["failed"]) == (40, 0, 0, 0)
    finally:
        restarted.stop()
