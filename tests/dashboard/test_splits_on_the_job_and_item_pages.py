"""The liquid tail on the dashboard: the job page lists splits, and each piece's page links to the other."""

import pytest

from tests.api.helpers import create_job, take

pytestmark = pytest.mark.django_db


def test_a_split_shows_on_the_job_page_and_links_its_pieces(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/f.csv?start=0&end=1000"])
    held = take(worker_client, job["id"], "holder")["leases"][0]
    answer = worker_client.post(
        f"/api/v1/leases/{held['id']}/split/", {"token": held["token"], "at": 250}, format="json"
    ).json()
    remainder = answer["remainder"]
    browser = browser_for("viewer")

    page = browser.get(f"/jobs/{job['id']}/").content.decode()
    assert "tail splitting on" in page
    assert '<h2>Splits <span class="sub">1 piece split off</span></h2>' in page
    assert f'href="/jobs/{job["id"]}/items/{held["id"]}/">/data/f.csv?start=0&amp;end=250</a>' in page
    assert f"records [250, 1000) became pending item #{remainder}" in page

    piece = browser.get(f"/jobs/{job['id']}/items/{remainder}/").content.decode()
    assert "/data/f.csv?start=250&amp;end=1000" in piece
    assert f'<a href="/jobs/{job["id"]}/items/{held["id"]}/">item #{held["id"]}</a>' in piece  # split from
    assert "remainder" in piece and f"made from item {held['id']}" in piece


def test_a_job_without_tail_splitting_says_so(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/f.csv?start=0&end=1000"], split_tail=False)
    page = browser_for("viewer").get(f"/jobs/{job['id']}/").content.decode()
    assert "tail splitting off" in page and "(off for this job)" in page and "No splits." in page
