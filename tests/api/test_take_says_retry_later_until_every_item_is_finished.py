import pytest

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


def test_nothing_pending_but_leases_live_means_retry_later(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"], lease_timeout=3)
    lease = take(worker_client, job["id"], "holder")["leases"][0]
    waiting = take(worker_client, job["id"], "idle")
    assert waiting["leases"] == [] and waiting["exhausted"] is False
    assert 0 < waiting["retry_after"] <= 3
    assert (waiting["leased_by_you"], waiting["leased_by_others"]) == (0, 1)
    mine = take(worker_client, job["id"], "holder")
    assert (mine["leased_by_you"], mine["leased_by_others"]) == (1, 0)
    done = take(worker_client, job["id"], "holder", complete=[{"id": lease["id"], "token": lease["token"]}])
    assert done["exhausted"] is True and done["retry_after"] is None
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/").json()["state"] == "done"


def test_take_with_completions_reports_lost_ones(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b", "/c"])
    a, b = take(worker_client, job["id"], count=2)["leases"]
    result = take(
        worker_client,
        job["id"],
        complete=[{"id": a["id"], "token": a["token"]}, {"id": b["id"], "token": b["token"] + 99}],
    )
    assert result["completed"] == [a["id"]] and result["lost"] == [b["id"]]
    assert len(result["leases"]) == 1


def test_take_validates_its_input(worker_client, job_name, settings):
    job = create_job(worker_client, job_name, ["/a"])
    settings.SHARDLINE_MAX_TAKE = 10
    for body in (
        {},
        {"worker": ""},
        {"worker": "w", "count": 0},
        {"worker": "w", "count": 11},
        {"worker": "w", "complete": [{"id": 1}]},
        {"worker": "w", "complete": [{"id": 1, "token": 2**70}]},
        {"worker": "w\x00"},
        {"worker": "w", "extra": 1},
    ):
        response = worker_client.post(f"/api/v1/jobs/{job['id']}/leases/", body, format="json")
        assert response.status_code == 400, body
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()["leased"] == 0


def test_completing_the_last_item_on_its_own_finishes_the_job(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"])
    a, b = take(worker_client, job["id"], count=2)["leases"]
    assert (
        worker_client.post(f"/api/v1/leases/{a['id']}/complete/", {"token": a["token"]}, format="json").status_code
        == 200
    )
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/").json()["state"] == "running"
    fail = worker_client.post(f"/api/v1/leases/{b['id']}/fail/", {"token": b["token"], "error": "x"}, format="json")
    assert fail.status_code == 200
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/").json()["state"] == "running"  # b is back to pending
    again = take(worker_client, job["id"])["leases"][0]
    worker_client.post(f"/api/v1/leases/{again['id']}/complete/", {"token": again["token"]}, format="json")
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/").json()["state"] == "done"
