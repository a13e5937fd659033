"""A take of a paused job says so: who paused it and when, in the answer, and the SDK logs it once.

Found: a take of a paused job answered nothing, with retry_after and
waiting_on null, and an SDK worker waited silently.
"""

import logging
import threading
import uuid

from tests.support import wait_until
from worker_sdk import WorkQueue


def test_the_take_answer_names_who_paused_the_job(live_api, live_keys):
    worker, admin = live_api("worker"), live_api("admin")
    job = worker.post("/api/v1/jobs/", {"name": f"paused-{uuid.uuid4().hex[:8]}", "works": ["/a", "/b"]}).json()
    assert admin.post(f"/api/v1/jobs/{job['id']}/pause/").status_code == 200
    answer = worker.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "w1"}).json()
    assert answer["leases"] == [] and answer["retry_after"] > 0
    assert answer["paused"].startswith(f"job {job['name']!r} was paused by live-admin-")
    assert " at 20" in answer["paused"] and "resumed" in answer["paused"]
    assert admin.post(f"/api/v1/jobs/{job['id']}/resume/").status_code == 200
    answer = worker.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "w1"}).json()
    assert answer["paused"] is None and len(answer["leases"]) == 1


def test_an_sdk_worker_logs_the_pause_once_and_reads_on_after_the_resume(live_server_url, live_keys, live_api, caplog):
    name = f"paused-sdk-{uuid.uuid4().hex[:8]}"
    queue = WorkQueue(["/a", "/b", "/c"], shuffle=False, name=name, url=live_server_url, token=live_keys["worker"])
    admin = live_api("admin")
    items, errors = [], []

    def read():
        try:
            items.extend(queue.items())
        except Exception as exc:  # surfaced by the assertions below
            errors.append(exc)

    job = live_api("worker").post("/api/v1/jobs/", {"name": name, "works": ["/a", "/b", "/c"], "shuffle": False})
    assert job.status_code in (200, 201), job.text
    job_id = job.json()["id"]
    assert admin.post(f"/api/v1/jobs/{job_id}/pause/").status_code == 200
    with caplog.at_level(logging.INFO, logger="worker_sdk"):
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        said = wait_until(
            lambda: [r for r in caplog.records if "was paused by" in r.getMessage()], 20, 0.05, "the pause logged"
        )
        assert admin.post(f"/api/v1/jobs/{job_id}/resume/").status_code == 200
        reader.join(60)
    assert not reader.is_alive() and not errors, errors
    assert items == ["/a", "/b", "/c"]
    paused = [r for r in caplog.records if "was paused by" in r.getMessage()]
    assert len(said) == len(paused) == 1 and paused[0].levelno == logging.WARNING
    assert any("was resumed" in r.getMessage() for r in caplog.records)
