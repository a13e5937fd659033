import pytest

from server.models import Event, Item

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


def fail(client, lease, error="reader crashed"):
    return client.post(f"/api/v1/leases/{lease['id']}/fail/", {"token": lease["token"], "error": error}, format="json")


def test_a_failed_item_goes_back_to_pending_then_fails_after_max_attempts(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/bad", "/good"], shuffle=False, max_attempts=3)
    states = []
    for attempt in range(3):
        lease = take(worker_client, job["id"])["leases"][0]
        assert lease["item"] == "/bad"
        body = fail(worker_client, lease, f"attempt {attempt}").json()
        states.append((body["state"], body["attempts"]))
    assert states == [("pending", 1), ("pending", 2), ("failed", 3)]
    item = Item.objects.get(job_id=job["id"], position=0)
    assert item.state == "failed" and item.error == "attempt 2"
    assert list(
        Event.objects.filter(job_id=job["id"])
        .exclude(kind__in=["created", "state"])
        .order_by("id")
        .values_list("kind", flat=True)
    ) == [
        "retried",
        "retried",
        "failed",
    ]


def test_the_job_goes_on_after_an_item_failed(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/bad", "/good"], shuffle=False, max_attempts=1)
    fail(worker_client, take(worker_client, job["id"])["leases"][0])
    result = take(worker_client, job["id"])
    assert [lease["item"] for lease in result["leases"]] == ["/good"]
    lease = result["leases"][0]
    finished = take(worker_client, job["id"], complete=[{"id": lease["id"], "token": lease["token"]}])
    assert finished["exhausted"] is True
    marks = worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    assert (marks["state"], marks["done"], marks["failed"], marks["pending"], marks["leased"]) == ("done", 1, 1, 0, 0)


def test_an_expired_lease_counts_as_an_attempt(worker_client, job_name, service_time):
    job = create_job(worker_client, job_name, ["/slow"], max_attempts=1)
    take(worker_client, job["id"], "w-dead")
    service_time.advance(job["lease_timeout"] + 1)
    result = take(worker_client, job["id"], "w-other")
    assert result["leases"] == []
    assert result["exhausted"] is True
    item = Item.objects.get(job_id=job["id"])
    assert item.state == "failed" and "lease expired" in item.error


def test_error_text_with_a_nul_byte_is_kept_readable(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/x"], max_attempts=2)
    lease = take(worker_client, job["id"])["leases"][0]
    assert fail(worker_client, lease, "bad\x00byte").status_code == 200
    assert Item.objects.get(job_id=job["id"]).error == "bad\\x00byte"
