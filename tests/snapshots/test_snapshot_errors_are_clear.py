import pytest

from server.models import ItemHistory, SnapshotRestore

from .helpers import create_job, snapshot

pytestmark = pytest.mark.django_db


def test_an_unknown_snapshot_or_job_is_404(worker_client, job_name):
    job = create_job(worker_client, job_name)
    response = worker_client.post(f"/api/v1/jobs/{job['id']}/snapshots/999999999/restore/", {}, format="json")
    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert "snapshot" in response.json()["message"]
    assert worker_client.post("/api/v1/jobs/999999999/snapshots/", {}, format="json").status_code == 404
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/items/999999999/history/").status_code == 404


def test_a_snapshot_of_another_job_is_404_and_restores_nothing(worker_client, job_name):
    job = create_job(worker_client, job_name)
    other = create_job(worker_client, job_name + "-other")
    snap = snapshot(worker_client, other["id"])
    response = worker_client.post(f"/api/v1/jobs/{job['id']}/snapshots/{snap['id']}/restore/", {}, format="json")
    assert response.status_code == 404
    assert not SnapshotRestore.objects.exists() and not ItemHistory.objects.exists()


@pytest.mark.parametrize(
    "body",
    [{"nope": 1}, {"worker": "x" * 300}, {"generation": "g" * 201}, {"worker": "a\x00b"}, ["not", "an", "object"]],
)
def test_bad_input_is_400_and_writes_nothing(worker_client, job_name, body):
    job = create_job(worker_client, job_name)
    snap = snapshot(worker_client, job["id"])
    restore = worker_client.post(f"/api/v1/jobs/{job['id']}/snapshots/{snap['id']}/restore/", body, format="json")
    assert restore.status_code == 400 and restore.json()["error"] == "invalid"
    if isinstance(body, dict) and "generation" not in body:
        assert worker_client.post(f"/api/v1/jobs/{job['id']}/snapshots/", body, format="json").status_code == 400
    assert not SnapshotRestore.objects.exists()


def test_viewers_cannot_snapshot_or_restore_but_can_read_history(worker_client, viewer_client, job_name):
    job = create_job(worker_client, job_name)
    snap = snapshot(worker_client, job["id"])
    assert viewer_client.post(f"/api/v1/jobs/{job['id']}/snapshots/", {}, format="json").status_code == 403
    restore = viewer_client.post(f"/api/v1/jobs/{job['id']}/snapshots/{snap['id']}/restore/", {}, format="json")
    assert restore.status_code == 403
    item_id = worker_client.get(f"/api/v1/jobs/{job['id']}/items/").json()["results"][0]["id"]
    assert viewer_client.get(f"/api/v1/jobs/{job['id']}/items/{item_id}/history/").status_code == 200


def test_a_cancelled_job_cannot_be_restored(worker_client, admin_client, job_name):
    job = create_job(worker_client, job_name)
    snap = snapshot(worker_client, job["id"])
    assert admin_client.post(f"/api/v1/jobs/{job['id']}/cancel/").status_code == 200
    response = worker_client.post(f"/api/v1/jobs/{job['id']}/snapshots/{snap['id']}/restore/", {}, format="json")
    assert response.status_code == 409 and response.json()["error"] == "invalid_state"
