"""16 processes lease and complete one job through the HTTP API at once."""

import json
import multiprocessing
import time
import uuid
from collections import Counter

import pytest

from . import workload

ITEMS = 2000
PROCESSES = 16


def run_processes(target, argument_lists, timeout):
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=args) for args in argument_lists]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout)
        assert process.exitcode == 0, f"worker process exited with {process.exitcode}"


@pytest.mark.smoke
def test_sixteen_processes_complete_every_item_exactly_once(live_api, live_server_url, live_keys, tmp_path):
    api = live_api("worker")
    name = f"race-{uuid.uuid4().hex[:8]}"
    job = api.post("/api/v1/jobs/", {"name": name, "works": [f"/data/{i:05d}" for i in range(ITEMS)]}).json()
    start_at = time.time() + 3
    outputs = [tmp_path / f"w{i}.json" for i in range(PROCESSES)]
    run_processes(
        workload.lease_worker,
        [
            (live_server_url, live_keys["worker"], job["id"], f"w{i}", str(outputs[i]), start_at, i)
            for i in range(PROCESSES)
        ],
        timeout=180,
    )

    per_worker = [json.loads(path.read_text()) for path in outputs]
    completions = Counter(item for result in per_worker for item in result["completed"])
    assert len(completions) == ITEMS
    assert set(completions.values()) == {1}, "an item was completed twice"
    # Work was really shared, not done by one process while the others waited.
    assert sum(1 for result in per_worker if result["completed"]) >= PROCESSES // 2

    marks = api.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    assert (marks["state"], marks["done"], marks["pending"], marks["leased"], marks["failed"]) == (
        "done",
        ITEMS,
        0,
        0,
        0,
    )
    # attempts == 1 everywhere: no item was ever leased a second time.
    audit = api.get(f"/api/v1/jobs/{job['id']}/items/?format=csv").text.splitlines()
    header = audit[0].split(",")
    attempts = {line.split(",")[header.index("attempts")] for line in audit[1:]}
    assert len(audit) - 1 == ITEMS and attempts == {"1"}


@pytest.mark.smoke
def test_eight_processes_creating_the_same_job_get_one_job(live_api, live_server_url, live_keys, tmp_path):
    body = {"name": f"create-{uuid.uuid4().hex[:8]}", "works": [f"/data/{i}" for i in range(5000)], "num_epochs": 3}
    start_at = time.time() + 3
    outputs = [tmp_path / f"c{i}.json" for i in range(8)]
    run_processes(
        workload.create_job,
        [(live_server_url, live_keys["worker"], body, str(outputs[i]), start_at) for i in range(8)],
        timeout=120,
    )
    results = [json.loads(path.read_text()) for path in outputs]
    assert sorted(r["status"] for r in results) == [200] * 7 + [201]
    assert len({r["body"]["id"] for r in results}) == 1
    jobs = live_api("viewer").get("/api/v1/jobs/?page_size=500").json()["results"]
    assert [j["name"] for j in jobs].count(body["name"]) == 1
    marks = live_api("viewer").get(f"/api/v1/jobs/{results[0]['body']['id']}/watermarks/").json()
    assert marks["epochs"][0]["total"] == marks["epochs"][0]["pending"] == 5000
