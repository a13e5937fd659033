"""Code that runs in separate worker processes (spawned, so importable)."""

from __future__ import annotations

import json
import random
import time

import requests


def wait_for(start_at: float) -> None:
    # All processes begin at the same instant, so their first requests race.
    time.sleep(max(0.0, start_at - time.time()))


def lease_worker(base: str, key: str, job_id: int, name: str, out_path: str, start_at: float, seed: int) -> None:
    """Takes (1-4 at a time) and completes until the job is exhausted; records every completion."""
    rng = random.Random(seed)
    session = requests.Session()
    session.headers["Authorization"] = f"Token {key}"
    completed, held = [], []
    wait_for(start_at)
    while True:
        body = {
            "worker": name,
            "count": rng.randint(1, 4),
            "complete": [{"id": lease["id"], "token": lease["token"]} for lease in held],
        }
        response = session.post(f"{base}/api/v1/jobs/{job_id}/leases/", json=body, timeout=30)
        response.raise_for_status()
        result = response.json()
        completed += result["completed"]
        assert not result["lost"], result["lost"]
        held = result["leases"]
        if result["exhausted"]:
            break
        if not held:
            time.sleep(result["retry_after"] or 0.05)  # a worker's pause when nothing came, as the server asks
    with open(out_path, "w") as handle:
        json.dump({"worker": name, "completed": completed}, handle)


def create_job(base: str, key: str, body: dict, out_path: str, start_at: float) -> None:
    wait_for(start_at)
    response = requests.post(f"{base}/api/v1/jobs/", json=body, headers={"Authorization": f"Token {key}"}, timeout=60)
    with open(out_path, "w") as handle:
        json.dump({"status": response.status_code, "body": response.json()}, handle)
