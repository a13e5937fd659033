"""Helpers of the snapshot tests (API level)."""

from django.db import connection

from ..api.helpers import complete, create_job, take  # noqa: F401  (re-exported)


def snapshot(client, job_id, **body):
    response = client.post(f"/api/v1/jobs/{job_id}/snapshots/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def restore(client, job_id, snapshot_id, **body):
    response = client.post(f"/api/v1/jobs/{job_id}/snapshots/{snapshot_id}/restore/", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def take_and_complete(client, job_id, n, worker="w1"):
    """Leases and completes ``n`` items one by one; returns their leases."""
    leases = []
    for _ in range(n):
        (lease,) = take(client, job_id, worker)["leases"]
        assert complete(client, lease).status_code == 200
        leases.append(lease)
    return leases


def states(job_id) -> dict[int, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, state FROM shardline_item WHERE job_id = %s", [job_id])
        return dict(cursor.fetchall())


def direct_counts(job_id) -> dict[tuple[int, str], int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT epoch, state, count(*) FROM shardline_item WHERE job_id = %s GROUP BY 1, 2", [job_id])
        return {(epoch, state): n for epoch, state, n in cursor.fetchall()}
