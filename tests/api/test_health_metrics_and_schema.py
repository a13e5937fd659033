import importlib.metadata
import re

import pytest
from django.db import connection

from server import checks
from tests.support import ROOT
from worker_sdk import __version__ as VERSION

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


@pytest.mark.smoke
def test_healthz_checks_the_database(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok", "database": "ok", "version": VERSION}


def test_one_version_for_the_package_the_sdk_and_the_server():
    # pyproject reads it from worker_sdk.__version__; the installed metadata must agree (a stale install would not).
    assert VERSION == importlib.metadata.version("shardline") and re.fullmatch(r"\d+\.\d+\.\d+", VERSION)
    assert f"## [{VERSION}]" in (ROOT / "CHANGELOG.md").read_text()


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
    # Postgres's own count of dead item rows (the same statistics snapshot
    # within this test's transaction).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'shardline_item'), 0)"
        )
        dead = cursor.fetchone()[0]
    assert f"shardline_item_dead_rows {float(dead)}" in body


@pytest.mark.smoke
def test_the_database_check_warns_when_autovacuum_is_off():
    # The machine's Postgres and the embedded one differ here: both are
    # covered by `make test` (this test is in the smoke subset).
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('autovacuum')")
        setting = cursor.fetchone()[0]
    found = checks.autovacuum_is_on(databases=["default"])
    if setting == "on":
        assert found == []
    else:
        assert [warning.id for warning in found] == ["shardline.W001"]
        assert "autovacuum" in found[0].msg
    assert checks.autovacuum_is_on(databases=None) == []


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
    assert "swagger-ui" in html
    # Every script and stylesheet from this server: no address of another
    # host. (Not the substring "cdn" anywhere: the page carries a random
    # CSRF token, which now and then spells it.)
    addresses = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", html)
    assert addresses and not [a for a in addresses if re.match(r"(?:[a-z]+:)?//", a, re.IGNORECASE)], addresses
    asset = next(part.split('"')[0] for part in html.split('src="')[1:] if "swagger" in part)
    assert client.get(asset).status_code == 200
