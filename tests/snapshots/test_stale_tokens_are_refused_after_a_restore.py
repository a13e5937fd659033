import pytest

from .helpers import complete, create_job, restore, snapshot, take, take_and_complete

pytestmark = pytest.mark.django_db


def test_a_lease_held_across_a_restore_cannot_complete_fail_or_extend(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(5)], shuffle=False)
    snap = snapshot(worker_client, job["id"])
    stale = take(worker_client, job["id"], "old-run", count=3)["leases"]
    restore(worker_client, job["id"], snap["id"])

    assert complete(worker_client, stale[0]).status_code == 409
    assert complete(worker_client, stale[0]).json()["error"] == "lease_lost"
    extend = worker_client.post(f"/api/v1/leases/{stale[1]['id']}/extend/", {"token": stale[1]["token"]}, format="json")
    assert extend.status_code == 409
    fail = worker_client.post(f"/api/v1/leases/{stale[2]['id']}/fail/", {"token": stale[2]["token"]}, format="json")
    assert fail.status_code == 409
    many = worker_client.post(
        "/api/v1/leases/extend/", {"leases": [{"id": s["id"], "token": s["token"]} for s in stale]}, format="json"
    ).json()
    assert sorted(many["lost"]) == sorted(s["id"] for s in stale)


def test_a_completion_carried_by_a_take_after_a_restore_is_reported_lost(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(5)], shuffle=False)
    snap = snapshot(worker_client, job["id"])
    (stale,) = take(worker_client, job["id"], "old-run")["leases"]
    restore(worker_client, job["id"], snap["id"])
    result = take(worker_client, job["id"], "old-run", complete=[{"id": stale["id"], "token": stale["token"]}])
    assert result["lost"] == [stale["id"]] and result["completed"] == []
    # The fenced item is handed out again, with a fresh token.
    assert result["leases"][0]["id"] == stale["id"] and result["leases"][0]["token"] != stale["token"]


def test_a_completion_accepted_before_a_restore_cannot_be_replayed_after_it(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], shuffle=False)
    snap = snapshot(worker_client, job["id"])
    (done,) = take_and_complete(worker_client, job["id"], 1)
    restore(worker_client, job["id"], snap["id"])
    assert complete(worker_client, done).status_code == 409
