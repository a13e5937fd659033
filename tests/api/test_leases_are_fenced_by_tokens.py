"""Every (re)lease issues a new token; complete, fail and extend with an old one change nothing."""

import pytest

from server.models import Item

from .helpers import complete, create_job, take

pytestmark = pytest.mark.django_db


def watermark(client, job_id):
    return client.get(f"/api/v1/jobs/{job_id}/watermarks/").json()


@pytest.mark.smoke
def test_stale_token_cannot_complete(worker_client, job_name, service_time):
    job = create_job(worker_client, job_name, ["/only"])
    old = take(worker_client, job["id"], "slow")["leases"][0]
    service_time.advance(job["lease_timeout"] + 1)  # the holder went quiet
    take(worker_client, job["id"], "fast")  # reclaims the expired lease and leases it again
    new = Item.objects.get(job_id=job["id"])
    assert new.worker == "fast" and new.state == "leased" and new.token != old["token"]

    response = complete(worker_client, old)
    assert response.status_code == 409
    assert response.json()["error"] == "lease_lost"
    assert Item.objects.get(job_id=job["id"]).state == "leased"
    assert watermark(worker_client, job["id"])["done"] == 0


def test_expired_lease_goes_to_the_next_taker_with_a_new_token(worker_client, job_name, service_time):
    job = create_job(worker_client, job_name, ["/only"], max_attempts=5)
    first = take(worker_client, job["id"], "dead")["leases"][0]
    service_time.advance(job["lease_timeout"] + 1)  # the holder went quiet
    second = take(worker_client, job["id"], "alive")["leases"]
    assert [lease["item"] for lease in second] == ["/only"]
    assert second[0]["token"] != first["token"] and second[0]["id"] == first["id"]
    item = Item.objects.get(job_id=job["id"])
    assert item.attempts == 2 and item.worker == "alive"
    assert job_events(job["id"]) == ["expired"]


def job_events(job_id):
    from server.models import Event

    return list(
        Event.objects.filter(job_id=job_id, kind__in=["expired", "failed", "retried"]).values_list("kind", flat=True)
    )


def test_stale_token_cannot_fail_or_extend(worker_client, job_name, service_time):
    job = create_job(worker_client, job_name, ["/only"])
    old = take(worker_client, job["id"], "slow")["leases"][0]
    service_time.advance(job["lease_timeout"] + 1)  # the holder went quiet
    take(worker_client, job["id"], "fast")
    fail = worker_client.post(
        f"/api/v1/leases/{old['id']}/fail/", {"token": old["token"], "error": "boom"}, format="json"
    )
    extend = worker_client.post(f"/api/v1/leases/{old['id']}/extend/", {"token": old["token"]}, format="json")
    assert fail.status_code == 409 and extend.status_code == 409
    item = Item.objects.get(job_id=job["id"])
    assert item.state == "leased" and item.worker == "fast" and item.error == "lease expired while held by slow"


def test_a_repeated_completion_with_the_same_token_succeeds_once_counted(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"])
    lease = take(worker_client, job["id"])["leases"][0]
    assert complete(worker_client, lease, records=10).status_code == 200
    assert complete(worker_client, lease, records=10).status_code == 200
    assert watermark(worker_client, job["id"])["done"] == 1
    assert Item.objects.get(pk=lease["id"]).records == 10


def test_a_token_from_another_item_cannot_complete(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"])
    first, second = take(worker_client, job["id"], count=2)["leases"]
    response = worker_client.post(f"/api/v1/leases/{first['id']}/complete/", {"token": second["token"]}, format="json")
    assert response.status_code == 409
    assert Item.objects.get(pk=first["id"]).state == "leased"


def test_extend_pushes_the_expiry_forward(worker_client, job_name, service_time):
    job = create_job(worker_client, job_name, ["/a"], lease_timeout=600)
    lease = take(worker_client, job["id"])["leases"][0]
    service_time.advance(job["lease_timeout"] + 1)  # the holder went quiet
    response = worker_client.post(f"/api/v1/leases/{lease['id']}/extend/", {"token": lease["token"]}, format="json")
    assert response.status_code == 200
    from django.utils import timezone

    assert Item.objects.get(pk=lease["id"]).expires_at > timezone.now()
    # Extended, so the next take does not reclaim it.
    assert take(worker_client, job["id"], "other")["leases"] == []
    assert Item.objects.get(pk=lease["id"]).worker == "w1"


def test_batch_extend_reports_lost_leases(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"])
    a, b = take(worker_client, job["id"], count=2)["leases"]
    response = worker_client.post(
        "/api/v1/leases/extend/",
        {"leases": [{"id": a["id"], "token": a["token"]}, {"id": b["id"], "token": b["token"] + 1000}]},
        format="json",
    )
    assert response.status_code == 200
    assert list(response.json()["extended"]) == [str(a["id"])]
    assert response.json()["lost"] == [b["id"]]
