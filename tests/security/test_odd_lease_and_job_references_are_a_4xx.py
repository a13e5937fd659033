"""Two inputs that answered 500: a heartbeat for a lease its holder already completed, and a job id in other digits."""

import uuid

from .trust import new_job, take


def test_extending_a_completed_lease_is_a_409(live_api):
    worker = live_api("worker")
    job = new_job(worker, f"ext-{uuid.uuid4().hex[:8]}", works=["/a"])
    (lease,) = take(worker, job["id"]).json()["leases"]
    assert worker.post(f"/api/v1/leases/{lease['id']}/complete/", {"token": lease["token"]}).status_code == 200
    late = worker.post(f"/api/v1/leases/{lease['id']}/extend/", {"token": lease["token"]})
    assert late.status_code == 409 and "completed" in late.json()["message"]


def test_a_job_filter_in_other_digits_is_a_400(live_api):
    viewer = live_api("viewer")
    for job in ["%C2%B2", "%D9%A3", "1" * 40, "-1", "1.0"]:
        response = viewer.get(f"/api/v1/workers/?job={job}")
        assert response.status_code == 400, (job, response.status_code, response.text)
        assert response.json()["fields"]["job"] == ["expected a job id"]
