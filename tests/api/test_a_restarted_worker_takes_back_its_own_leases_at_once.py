"""A restarted worker of the same name takes its leases back at once, fenced (issue 28, LocalWorkMgr).

Without it a restarted worker waits out its old leases' expiry (30-60 s as
users set them) and then sees another worker read them. With it the leases
come back to it with new tokens: whatever the dead process might still send
is refused, and nobody else's leases move.
"""

import uuid

from server.models import Event, EventKind
from tests.api.helpers import complete, create_job, take


def resume(client, job_id, worker):
    return client.post(f"/api/v1/jobs/{job_id}/leases/resume/", {"worker": worker}, format="json")


def test_the_same_name_gets_its_leases_back_with_new_tokens(worker_client):
    job = create_job(worker_client, f"resume-{uuid.uuid4().hex[:8]}", shuffle=False)
    old = take(worker_client, job["id"], worker="worker:0", count=2)["leases"]
    other = take(worker_client, job["id"], worker="worker:1")["leases"]

    answer = resume(worker_client, job["id"], "worker:0")
    assert answer.status_code == 200, answer.content
    back = answer.json()["leases"]
    assert [lease["id"] for lease in back] == [lease["id"] for lease in old]
    assert [lease["item"] for lease in back] == [lease["item"] for lease in old]
    assert all(new["token"] != was["token"] for new, was in zip(back, old))

    # The old process is fenced; the new one completes; worker:1 keeps its lease.
    assert complete(worker_client, old[0]).status_code == 409
    assert complete(worker_client, back[0]).status_code == 200
    assert complete(worker_client, other[0]).status_code == 200
    assert resume(worker_client, job["id"], "worker:0").json()["leases"][0]["id"] == back[1]["id"]
    # The audit trail says so, on each item (the item page lists these events).
    events = Event.objects.filter(job_id=job["id"], kind=EventKind.RESUMED).order_by("id")
    assert [(e.item_id, e.worker) for e in events] == [
        (back[0]["id"], "worker:0"),
        (back[1]["id"], "worker:0"),
        (back[1]["id"], "worker:0"),
    ]


def test_another_users_worker_of_the_same_name_gets_nothing(client_for):
    holder, stranger = client_for("worker"), client_for("worker")
    job = create_job(holder, f"resume-own-{uuid.uuid4().hex[:8]}")
    (lease,) = take(holder, job["id"], worker="worker:0")["leases"]
    assert resume(stranger, job["id"], "worker:0").json() == {"leases": []}
    assert complete(holder, lease).status_code == 200  # still the holder's, token unchanged


def test_a_blank_worker_or_an_unknown_job_is_refused(worker_client):
    job = create_job(worker_client, f"resume-bad-{uuid.uuid4().hex[:8]}")
    assert resume(worker_client, job["id"], "  ").status_code == 400
    assert worker_client.post(f"/api/v1/jobs/{job['id']}/leases/resume/", {}, format="json").status_code == 400
    assert resume(worker_client, 987654321, "worker:0").status_code == 404
