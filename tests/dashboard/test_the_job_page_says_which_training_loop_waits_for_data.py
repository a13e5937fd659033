"""The job page's Data stall table: each training loop's share of time spent waiting for data, the starved first.

The counts come as heartbeats bring them (server/sql/extend.sql); a loop
that waited over half of its time is marked starved, and a worker name is
text on the page, never markup.
"""

import re

import pytest

from tests.api.helpers import create_job, take

pytestmark = pytest.mark.django_db


def report(client, job_id, worker, waited, busy):
    (lease,) = take(client, job_id, worker)["leases"]
    body = {
        "leases": [{"id": lease["id"], "token": lease["token"]}],
        "stall": {"clock": "c", "waited": waited, "busy": busy},
    }
    assert client.post("/api/v1/leases/extend/", body, format="json").status_code == 200


def test_the_starved_loop_comes_first_with_its_share_and_a_mark(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name)
    report(worker_client, job["id"], "fed", 2.0, 8.0)
    report(worker_client, job["id"], "starved", 8.0, 2.0)
    report(worker_client, job["id"], '<b id="x">"odd"</b>', 0.0, 4.0)
    html = browser_for("viewer").get(f"/jobs/{job['id']}/").content.decode()
    section = html[html.index("<h2>Data stall") :]
    rows = re.findall(r'<tr data-worker="([^"]+)" data-stall="([0-9.]+)">(.*?)</tr>', section, re.S)
    assert [(worker, share) for worker, share, _ in rows] == [
        ("starved", "0.800"),
        ("fed", "0.200"),
        ("&lt;b id=&quot;x&quot;&gt;&quot;odd&quot;&lt;/b&gt;", "0.000"),
    ]
    starved, fed, _odd = (cells for _worker, _share, cells in rows)
    assert "80% of its time" in starved and ">starved</span>" in starved
    assert "20% of its time" in fed and ">starved</span>" not in fed
    assert '<b id="x">' not in html


def test_a_job_without_reports_says_so(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name)
    html = browser_for("viewer").get(f"/jobs/{job['id']}/live/").content.decode()
    assert "No training loop has reported its waits yet." in html
