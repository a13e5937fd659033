"""A finished job's timeline spans its leases, not a window that runs long past them.

Found: the activity of a finished job drawn in 2% of the timeline's width.
Then: a job's page said "Done at" while its items were still being read,
and its timeline ended before their completions. A take that read the last
epoch alone (a synchronous rank whose input ran ahead) found nothing left in
its epoch and marked the whole job done, with an earlier epoch still held and
pending: its finish was not guarded as a standalone completion's is, and was
stamped by the web process's clock, not the database's that stamps leases.
"""

import re
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from django.test import Client

from dashboard.presenters import TIMELINE_LEFT, TIMELINE_WIDTH, timeline_chart
from server.models import Item, Job
from server.services import accounts

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def lease(worker, start, stop):
    return {
        "id": start,
        "item": f"/{start}",
        "worker": worker,
        "state": "done",
        "leased_at": T0 + timedelta(seconds=start),
        "completed_at": T0 + timedelta(seconds=stop),
    }


def test_the_bars_of_a_finished_job_fill_the_width():
    data = {
        "start": T0 - timedelta(minutes=29),
        "end": T0 + timedelta(minutes=1),
        "now": T0 + timedelta(hours=2),
        "leases": [lease("w0", 0, 20), lease("w1", 10, 36)],
        "truncated": False,
    }
    chart = timeline_chart(data, ended=True)
    assert chart["start"] == T0 and chart["end"] == T0 + timedelta(seconds=36)
    first, last = chart["rows"][0]["bars"][0], chart["rows"][1]["bars"][0]
    assert first["x"] == TIMELINE_LEFT and last["x"] + last["width"] == TIMELINE_WIDTH - 4
    # A running job keeps its window to now: idle lanes at the right are the tail.
    assert timeline_chart(data)["end"] == data["end"]


def test_a_lease_completed_after_a_cancel_stays_inside_the_window():
    # A holder may complete what it read after the job was cancelled: that is activity too.
    data = {
        "start": T0,
        "end": T0 + timedelta(seconds=10),  # cancelled then
        "now": T0 + timedelta(hours=2),
        "leases": [lease("w0", 0, 5), lease("w1", 1, 16)],
        "truncated": False,
    }
    chart = timeline_chart(data, ended=True)
    assert chart["end"] == T0 + timedelta(seconds=16)
    last = chart["rows"][1]["bars"][0]
    assert last["x"] + last["width"] == TIMELINE_WIDTH - 4


@pytest.fixture
def timeline_page(django_db_blocker, live_server_url):
    """The job page's timeline as a logged-in viewer sees it, over the database the live server writes."""
    with django_db_blocker.unblock():
        user, _ = accounts.ensure_user(f"viewer-{uuid.uuid4().hex[:6]}", "viewer")
        client = Client()
        client.force_login(user)

    def get(job_id):
        with django_db_blocker.unblock():
            response = client.get(f"/jobs/{job_id}/timeline/")
        assert response.status_code == 200
        return response.content.decode()

    return get


@pytest.mark.timeout(60)
def test_a_job_is_done_only_after_its_last_completion_and_its_timeline_shows_every_lease(
    live_api, timeline_page, django_db_blocker, job_name
):
    api = live_api("worker")
    response = api.post("/api/v1/jobs/", {"name": job_name, "works": ["/a", "/b"], "num_epochs": 2, "shuffle": False})
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]

    def take(worker, count=1, complete=(), **scope):
        body = {"worker": worker, "count": count, "complete": [{"id": x["id"], "token": x["token"]} for x in complete]}
        response = api.post(f"/api/v1/jobs/{job_id}/leases/", {**body, **scope})
        assert response.status_code == 200, response.text
        return response.json()

    held = take("rank0")["leases"]
    assert [(x["item"], x["epoch"]) for x in held] == [("/a", 0)]
    # rank1's input ran ahead: it reads the last epoch alone, and finishes it
    # while epoch 0 is still being read.
    alone = {"upto_epoch": 1, "from_epoch": 1, "sync": True}
    ahead = take("rank1", 2, **alone)["leases"]
    assert [(x["item"], x["epoch"]) for x in ahead] == [("/a", 1), ("/b", 1)]
    assert take("rank1", 1, ahead, **alone)["leases"] == []
    assert api.get(f"/api/v1/jobs/{job_id}/").json()["state"] == "running"

    rest = take("rank0", 1, held)["leases"]
    assert [(x["item"], x["epoch"]) for x in rest] == [("/b", 0)], "epoch 0's last item was never handed out"
    assert take("rank0", 1, rest)["exhausted"]

    with django_db_blocker.unblock():
        job = Job.objects.get(pk=job_id)
        completions = sorted(Item.objects.filter(job_id=job_id).values_list("completed_at", flat=True))
    assert job.state == "done" and len(completions) == 4
    assert job.finished_at >= completions[-1], (job.finished_at, completions)
    page = timeline_page(job_id)
    bars = [
        (float(x), float(w)) for x, w in re.findall(r'<rect class="seg done" x="([\d.]+)" y="0" width="([\d.]+)"', page)
    ]
    assert len(bars) == 4, page
    assert all(TIMELINE_LEFT <= x and x + width <= TIMELINE_WIDTH - 4 + 0.1 for x, width in bars), bars
