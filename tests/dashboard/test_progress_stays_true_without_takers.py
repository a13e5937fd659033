"""Watermarks, /metrics and the dashboard tell the truth even when no worker takes again.

Time passes by moving the service's time on (support.ServiceTime; the clock
is never slept on): a lease whose holder stopped heartbeating expires, a
worker that stopped calling is gone.
"""

import re

import pytest

from tests.api.helpers import create_job, take

pytestmark = pytest.mark.django_db


def marks(client, job_id) -> dict:
    response = client.get(f"/api/v1/jobs/{job_id}/watermarks/")
    assert response.status_code == 200, response.content
    return response.json()


def test_an_expired_lease_is_pending_everywhere_before_anyone_takes_again(
    worker_client, admin_client, job_name, client, service_time
):
    job = create_job(worker_client, job_name, ["/a", "/b", "/c"], lease_timeout=30)
    take(worker_client, job["id"], "w1", 2)
    before = marks(worker_client, job["id"])
    assert (before["leased"], before["pending"], before["expired"]) == (2, 1, 0)

    # The holder died: 31 s later its leases have expired, and nobody took since.
    service_time.advance(31)
    after = marks(worker_client, job["id"])
    assert (after["leased"], after["pending"], after["expired"]) == (0, 3, 2)
    assert (after["epochs"][0]["leased"], after["epochs"][0]["pending"], after["epochs"][0]["expired"]) == (0, 3, 2)

    metrics = admin_client.get("/metrics").content.decode()
    assert f'shardline_job_items{{job="{job["name"]}",state="leased"}} 0.0' in metrics
    assert f'shardline_job_items{{job="{job["name"]}",state="pending"}} 3.0' in metrics

    # The next take hands the expired leases out again, as the reads said.
    again = take(worker_client, job["id"], "w2", 3)
    assert sorted(lease["item"] for lease in again["leases"]) == ["/a", "/b", "/c"]
    assert marks(worker_client, job["id"])["leased"] == 3


def test_eta_only_while_running_and_no_rate_or_workers_once_ended(worker_client, admin_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(6)])
    leases = take(worker_client, job["id"], "w1", 2)["leases"]
    take(worker_client, job["id"], "w1", 1, complete=[{"id": lease["id"], "token": lease["token"]} for lease in leases])
    running = marks(worker_client, job["id"])
    assert running["state"] == "running" and running["eta_seconds"] > 0 and running["live_workers"] == 1

    admin_client.post(f"/api/v1/jobs/{job['id']}/pause/")
    paused = marks(worker_client, job["id"])
    assert paused["state"] == "paused" and paused["eta_seconds"] is None
    assert paused["rate_per_second"] > 0 and paused["live_workers"] == 1  # a paused job still has its workers

    admin_client.post(f"/api/v1/jobs/{job['id']}/cancel/")
    cancelled = marks(worker_client, job["id"])
    assert cancelled["state"] == "cancelled"
    assert (cancelled["eta_seconds"], cancelled["rate_per_second"], cancelled["live_workers"]) == (None, None, None)


def test_the_dashboard_shows_the_same_truth(worker_client, admin_client, job_name, browser_for, service_time):
    job = create_job(worker_client, job_name, ["/a", "/b", "/c"], lease_timeout=30)
    take(worker_client, job["id"], "w1", 2)
    # The worker last called 95 s ago: its leases expired, it is gone (past
    # twice the lease timeout), and the page says when to the second.
    service_time.advance(95)
    viewer = browser_for("viewer")
    page = viewer.get(f"/jobs/{job['id']}/").content.decode()
    assert "epoch 0: 0 done, 0 leased, 3 pending, 0 failed of 3" in page
    assert re.search(r"\(1m 3[5-9]s ago\)", page), page
    assert '<span class="badge">gone</span>' in page
    summary = page[page.index('class="summary"') : page.index("</section>")]
    assert re.search(r"Live workers</span><strong>0<", summary)

    admin_client.post(f"/api/v1/jobs/{job['id']}/pause/")
    summary = viewer.get(f"/jobs/{job['id']}/live/").content.decode()
    assert re.search(r"ETA</span><strong>—<", summary)
    admin_client.post(f"/api/v1/jobs/{job['id']}/cancel/")
    summary = viewer.get(f"/jobs/{job['id']}/live/").content.decode()
    assert re.search(r"Items/min</span><strong>—<", summary) and re.search(r"Live workers</span><strong>—<", summary)
    table = viewer.get("/jobs/table/?state=cancelled").content.decode()
    row = table[table.index(job["name"]) :]
    row = row[: row.index("</tr>")]
    assert row.count(">—<") == 3, row  # items/min, ETA, workers
