import pytest

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


def action(client, job_id, name):
    return client.post(f"/api/v1/jobs/{job_id}/{name}/")


def test_a_paused_job_hands_out_nothing_until_resumed(worker_client, admin_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], shuffle=False)
    first = take(worker_client, job["id"])["leases"][0]
    assert action(admin_client, job["id"], "pause").json()["state"] == "paused"
    paused = take(worker_client, job["id"], complete=[{"id": first["id"], "token": first["token"]}])
    # Completions of leases held before the pause still count.
    assert paused["leases"] == [] and paused["exhausted"] is False and paused["retry_after"] > 0
    assert paused["completed"] == [first["id"]]
    assert action(admin_client, job["id"], "resume").json()["state"] == "running"
    assert [lease["item"] for lease in take(worker_client, job["id"])["leases"]] == ["/b"]


def test_a_cancelled_job_is_a_409_naming_who_cancelled_it(worker_client, admin_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"])
    held = take(worker_client, job["id"])["leases"][0]
    assert action(admin_client, job["id"], "cancel").json()["state"] == "cancelled"
    response = worker_client.post(
        f"/api/v1/jobs/{job['id']}/leases/",
        {"worker": "w", "complete": [{"id": held["id"], "token": held["token"]}]},
        format="json",
    )
    body = response.json()
    assert response.status_code == 409 and body["error"] == "job_cancelled"
    # client_for names the admin's user admin-<hex>.
    assert f"job {job_name!r} was cancelled by admin-" in body["message"] and "UTC" in body["message"]
    assert "exhausted" not in body
    # The item read before the cancel still counts as read.
    marks = worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    assert (marks["done"], marks["state"]) == (1, "cancelled")


def test_impossible_transitions_are_a_409_naming_the_state(worker_client, admin_client, job_name):
    job = create_job(worker_client, job_name, ["/a"])
    response = action(admin_client, job["id"], "resume")
    assert response.status_code == 409 and "ready" in response.json()["message"]
    action(admin_client, job["id"], "cancel")
    for name in ("pause", "cancel", "resume"):
        response = action(admin_client, job["id"], name)
        assert response.status_code == 409 and "cancelled" in response.json()["message"]


def test_unknown_job_is_a_404(admin_client, worker_client):
    assert action(admin_client, 987654321, "pause").status_code == 404
    assert worker_client.get("/api/v1/jobs/987654321/").status_code == 404
    assert worker_client.post("/api/v1/jobs/987654321/leases/", {"worker": "w"}, format="json").status_code == 404
    assert worker_client.get("/api/v1/jobs/99999999999999999999999/watermarks/").status_code == 404
