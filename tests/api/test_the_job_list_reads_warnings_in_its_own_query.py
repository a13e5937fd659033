"""The job list reads every job's warnings in its own query, not one more query per job."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from server.models import Event, EventKind, Job

from .helpers import create_job

pytestmark = pytest.mark.django_db


def warn(job_id: int, message: str) -> None:
    Event.objects.create(job_id=job_id, kind=EventKind.WARNING, message=message)


def list_jobs(client) -> tuple[dict, int]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/v1/jobs/", {"page_size": 50})
    assert response.status_code == 200, response.content
    return response.json(), len(queries)


def test_warnings_cost_the_list_no_query_per_job(worker_client, job_name):
    first = create_job(worker_client, f"{job_name}-0", ["/a"])
    warn(first["id"], "works[0] handed out whole")
    _body, one_job = list_jobs(worker_client)
    for i in range(1, 6):
        job = create_job(worker_client, f"{job_name}-{i}", ["/a"])
        warn(job["id"], f"second of {i}")
        warn(job["id"], f"first of {i}")
    body, six_jobs = list_jobs(worker_client)
    assert six_jobs == one_job
    by_name = {job["name"]: job["warnings"] for job in body["results"]}
    assert by_name[f"{job_name}-0"] == ["works[0] handed out whole"]
    # Oldest first, as the job's page shows them.
    assert by_name[f"{job_name}-3"] == ["second of 3", "first of 3"]
    assert worker_client.get(f"/api/v1/jobs/{first['id']}/").json()["warnings"] == ["works[0] handed out whole"]
    assert Job.objects.get(id=first["id"]).warnings == ["works[0] handed out whole"]
