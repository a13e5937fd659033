"""A done job shows when it finished, not "ETA 0s", and offers "Retry failed items" only when items failed."""

import pytest

from tests.api.helpers import complete, create_job, drain, take

pytestmark = pytest.mark.django_db


def test_a_job_done_without_failures_shows_done_at_and_no_retry(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"])
    drain(worker_client, job["id"])
    html = browser_for("admin").get(f"/jobs/{job['id']}/").content.decode()
    assert '<span class="state state-done">done</span>' in html
    assert '<span class="label">Done at</span>' in html and "ETA" not in html.split("Watermark per epoch")[0]
    assert "Retry failed items" not in html


def test_a_job_done_with_a_failed_item_offers_the_retry(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], max_attempts=1)
    lease = take(worker_client, job["id"])["leases"][0]
    worker_client.post(f"/api/v1/leases/{lease['id']}/fail/", {"token": lease["token"], "error": "bad"}, format="json")
    other = take(worker_client, job["id"])["leases"][0]
    assert complete(worker_client, other).status_code == 200
    take(worker_client, job["id"])  # finds the job exhausted
    html = browser_for("admin").get(f"/jobs/{job['id']}/").content.decode()
    assert '<span class="state state-done">done</span>' in html and "Retry failed items" in html
