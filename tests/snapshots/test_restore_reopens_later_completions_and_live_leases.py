import pytest

from server.models import Item

from .helpers import create_job, restore, snapshot, states, take, take_and_complete

pytestmark = pytest.mark.django_db


def test_restore_reopens_exactly_the_items_completed_after_the_snapshot_and_the_leased_ones(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(10)], shuffle=False)
    before = take_and_complete(worker_client, job["id"], 3)
    snap = snapshot(worker_client, job["id"])
    after = take_and_complete(worker_client, job["id"], 2)
    held = take(worker_client, job["id"], "w2", count=2)["leases"]

    result = restore(worker_client, job["id"], snap["id"])

    assert (result["reopened"], result["fenced"], result["repeated"]) == (2, 2, False)
    assert result["snapshot"] == snap["id"] and result["seq"] == snap["seq"]
    now = states(job["id"])
    assert {lease["id"] for lease in before} == {i for i, s in now.items() if s == "done"}
    assert all(now[lease["id"]] == "pending" for lease in after + held)
    assert sum(1 for s in now.values() if s == "pending") == 7
    assert not Item.objects.filter(job_id=job["id"], state="pending", seq__isnull=False).exists()


def test_reading_continues_from_the_snapshot_position_in_the_same_order(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(8)], seed=11)
    take_and_complete(worker_client, job["id"], 2)
    snap = snapshot(worker_client, job["id"])
    rest_of_first_run = [lease["item"] for lease in take_and_complete(worker_client, job["id"], 6)]
    restore(worker_client, job["id"], snap["id"])
    assert [lease["item"] for lease in take_and_complete(worker_client, job["id"], 6)] == rest_of_first_run


def test_a_done_job_runs_again_when_a_restore_reopens_items(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b", "/c"], shuffle=False)
    take_and_complete(worker_client, job["id"], 1)
    snap = snapshot(worker_client, job["id"])
    take_and_complete(worker_client, job["id"], 2)
    assert take(worker_client, job["id"])["exhausted"]
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/").json()["state"] == "done"

    assert restore(worker_client, job["id"], snap["id"])["state"] == "running"
    detail = worker_client.get(f"/api/v1/jobs/{job['id']}/").json()
    assert detail["state"] == "running" and detail["finished_at"] is None
    assert [lease["item"] for lease in take_and_complete(worker_client, job["id"], 2)] == ["/b", "/c"]
    assert take(worker_client, job["id"])["exhausted"]
