import pytest

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


@pytest.mark.smoke
def test_healthz_checks_the_database(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok", "database": "ok"}


def test_metrics_expose_job_gauges_and_lease_counters(client, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b", "/c"])
    lease = take(worker_client, job["id"])["leases"][0]
    take(worker_client, job["id"], complete=[{"id": lease["id"], "token": lease["token"]}])
    body = client.get("/metrics").content.decode()
    assert f'shardline_job_items{{job="{job_name}",state="done"}} 1.0' in body
    assert f'shardline_job_items{{job="{job_name}",state="leased"}} 1.0' in body
    assert f'shardline_job_items{{job="{job_name}",state="pending"}} 1.0' in body
    assert 'shardline_lease_operations_total{op="take",outcome="ok"}' in body
    assert "shardline_lease_operation_seconds_bucket" in body


@pytest.mark.smoke
def test_openapi_schema_and_swagger_ui_are_served_locally(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    text = schema.content.decode()
    for path in ("/api/v1/jobs/", "/api/v1/jobs/{job_id}/leases/", "/api/v1/leases/{lease_id}/complete/"):
        assert path in text
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "swagger-ui" in html and "cdn" not in html.lower()
    asset = next(part.split('"')[0] for part in html.split('src="')[1:] if "swagger" in part)
    assert client.get(asset).status_code == 200
