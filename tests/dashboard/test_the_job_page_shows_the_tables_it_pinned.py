"""A job of tables shows, on its page, which version of each table every run reads."""

import pytest

from server.models import Job
from tests.api.helpers import create_job

pytestmark = pytest.mark.django_db


def test_each_pinned_table_is_listed_with_its_version_and_rows(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/a.parquet"])
    # What slicing records for a Postgres table and an Iceberg table (server/tables/).
    Job.objects.filter(pk=job["id"]).update(
        tables=[
            {
                "work": "postgresql://trainer@db/warehouse?table=public.clicks",
                "kind": "postgres",
                "version": "7251:7251:",
                "rows": 1000000,
                "files": None,
                "key": ["day", "id"],
            },
            {
                "work": "iceberg://lake/analytics.events",
                "kind": "iceberg",
                "version": "8692108708112998818",
                "rows": 1,
                "files": 1,
                "key": None,
            },
        ]
    )
    page = browser_for("viewer").get(f"/jobs/{job['id']}/").content.decode()
    assert "<h2>Tables" in page
    assert "postgresql://trainer@db/warehouse?table=public.clicks" in page
    assert "as of snapshot 7251:7251: · key (day, id) · 1000000 rows" in page
    assert "iceberg · snapshot 8692108708112998818 · 1 row in 1 file" in page


def test_a_job_of_files_has_no_tables_card(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/a.parquet"])
    assert "<h2>Tables" not in browser_for("viewer").get(f"/jobs/{job['id']}/").content.decode()
