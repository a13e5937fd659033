"""Small things a newcomer met: /jobs/ was Django's bare 404, there was no favicon, and the chart's unit hid its top tick."""

import pytest

from tests.api.helpers import create_job

pytestmark = pytest.mark.django_db


def test_jobs_path_leads_to_the_jobs_list(browser_for):
    response = browser_for("viewer").get("/jobs/")
    assert response.status_code == 302 and response["Location"] == "/"


def test_every_page_links_a_favicon_that_is_served(browser_for, client):
    page = browser_for("viewer").get("/").content.decode()
    assert 'rel="icon" href="/static/dashboard/favicon.svg"' in page
    served = client.get("/static/dashboard/favicon.svg")
    assert served.status_code == 200 and b"<svg" in b"".join(served.streaming_content)
    assert client.get("/favicon.ico")["Location"] == "/static/dashboard/favicon.svg"


def test_the_throughput_unit_sits_above_the_top_tick(browser_for, worker_client, job_name):
    from dashboard.presenters import CHART_TOP

    job = create_job(worker_client, job_name, ["/a"])
    page = browser_for("viewer").get(f"/jobs/{job['id']}/").content.decode()
    assert '<text x="4" y="11" class="unit">items/min</text>' in page
    assert CHART_TOP - 11 >= 10  # the label's baseline clears the top tick's text by a line
