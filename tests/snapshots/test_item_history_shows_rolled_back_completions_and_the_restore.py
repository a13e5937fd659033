import pytest

from .helpers import complete, create_job, restore, snapshot, take, take_and_complete

pytestmark = pytest.mark.django_db


def test_an_item_completed_rolled_back_and_completed_again_shows_both_completions_and_the_restore(
    worker_client, job_name
):
    job = create_job(worker_client, job_name, ["/a", "/b"], shuffle=False)
    snap = snapshot(worker_client, job["id"])
    (first,) = take_and_complete(worker_client, job["id"], 1, worker="old-run")
    restored = restore(worker_client, job["id"], snap["id"])
    (second,) = take(worker_client, job["id"], "new-run")["leases"]
    assert second["id"] == first["id"]
    assert complete(worker_client, second, records=7).status_code == 200

    response = worker_client.get(f"/api/v1/jobs/{job['id']}/items/{first['id']}/history/")
    assert response.status_code == 200
    body = response.json()
    assert (body["item"], body["state"], body["epoch"], body["position"]) == ("/a", "done", 0, 0)
    kinds = [(e["kind"], e.get("worker"), e.get("rolled_back_by")) for e in body["history"]]
    assert kinds == [("completed", "old-run", restored["id"]), ("restored", None, None), ("completed", "new-run", None)]
    old, event, new = body["history"]
    # Fencing tokens are the holder's secret: the history names workers, never tokens.
    assert "token" not in old and "token" not in new and new["records"] == 7
    assert old["seq"] < new["seq"] and event["at"]
    assert event["restore"] == restored["id"] and event["snapshot"] == snap["id"]


def test_a_fenced_lease_is_in_the_history_and_the_restore_in_the_events(worker_client, admin_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], shuffle=False)
    snap = snapshot(worker_client, job["id"])
    (held,) = take(worker_client, job["id"], "old-run")["leases"]
    restore(worker_client, job["id"], snap["id"], worker="chief")
    history = worker_client.get(f"/api/v1/jobs/{job['id']}/items/{held['id']}/history/").json()["history"]
    assert [(e["kind"], e.get("worker")) for e in history] == [("leased", "old-run"), ("restored", None)]
    assert str(held["token"]) not in str(history)

    from server.models import Event

    event = Event.objects.get(job_id=job["id"], kind="restored")
    assert event.worker == "chief" and "1 leases taken back" in event.message
