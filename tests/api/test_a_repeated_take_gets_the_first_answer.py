"""A take sent again with the same Idempotency-Key is answered with the first answer and leases nothing more."""

import pytest
from django.db import connection

from server.models import Item, Job, TakeRequest

from .helpers import create_job

pytestmark = pytest.mark.django_db


def post_take(client, job_id, key, worker="w1", count=2):
    return client.post(
        f"/api/v1/jobs/{job_id}/leases/",
        {"worker": worker, "count": count, "complete": []},
        format="json",
        headers={"Idempotency-Key": key} if key is not None else {},
    )


def leased(job_id):
    return Item.objects.filter(job_id=job_id, state="leased").count()


def test_a_repeat_is_answered_with_the_first_answer(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b", "/c", "/d", "/e"])
    first = post_take(worker_client, job["id"], "k-1")
    again = post_take(worker_client, job["id"], "k-1")
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and len(first.json()["leases"]) == 2
    assert leased(job["id"]) == 2
    # Another key is another take.
    other = post_take(worker_client, job["id"], "k-2").json()
    assert {lease["id"] for lease in other["leases"]}.isdisjoint(lease["id"] for lease in first.json()["leases"])
    assert leased(job["id"]) == 4
    # A repeat of a take that carried completions says they were completed, as the first did.
    done = [{"id": lease["id"], "token": lease["token"]} for lease in first.json()["leases"]]
    body = {"worker": "w1", "count": 1, "complete": done}
    headers = {"Idempotency-Key": "k-3"}
    third = worker_client.post(f"/api/v1/jobs/{job['id']}/leases/", body, format="json", headers=headers).json()
    repeat = worker_client.post(f"/api/v1/jobs/{job['id']}/leases/", body, format="json", headers=headers).json()
    assert repeat == third and sorted(third["completed"]) == sorted(d["id"] for d in done) and third["lost"] == []
    assert leased(job["id"]) == 3


def test_a_take_across_an_epoch_boundary_stores_its_answer_for_repeats(worker_client, job_name):
    # Two items per epoch, three asked for: a second statement leases from
    # the next epoch, so the record of the first does not hold the answer.
    job = create_job(worker_client, job_name, ["/a", "/b"], num_epochs=2, shuffle=False)
    first = post_take(worker_client, job["id"], "k-edge", count=3)
    assert first.status_code == 200 and [lease["epoch"] for lease in first.json()["leases"]] == [0, 0, 1]
    record = TakeRequest.objects.get(job_id=job["id"], key="k-edge")
    assert not record.whole and record.answer is not None
    again = post_take(worker_client, job["id"], "k-edge", count=3)
    assert again.json() == first.json() and leased(job["id"]) == 3


def test_a_repeat_of_a_take_still_being_answered_is_told_to_retry(worker_client, job_name):
    from datetime import timedelta

    job = create_job(worker_client, job_name, ["/a", "/b"])
    # What a take in the middle of its statements leaves: a record, no answer
    # yet, and its session (this test's own, alive) still answering it. The
    # key is the worker's (the user who created the job).
    holder = Job.objects.get(pk=job["id"]).created_by_id
    TakeRequest.objects.create(
        job_id=job["id"], holder=holder, key="k-busy", worker="w1", whole=False, created_at=_now(), backend=_backend()
    )
    busy = post_take(worker_client, job["id"], "k-busy")
    assert busy.status_code == 503 and busy.json()["error"] == "request_in_progress"
    assert busy.headers["Retry-After"] == "1" and leased(job["id"]) == 0
    # A record left unanswered that long belongs to a server that died: the
    # leases it recorded (none here) are the answer, and nothing more is leased.
    TakeRequest.objects.filter(key="k-busy").update(created_at=_now() - timedelta(minutes=5))
    late = post_take(worker_client, job["id"], "k-busy")
    assert late.status_code == 200 and late.json()["leases"] == [] and late.json()["retry_after"] > 0
    assert leased(job["id"]) == 0


def test_a_repeat_of_a_take_whose_session_is_gone_gets_its_recorded_leases_at_once(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"])
    first = post_take(worker_client, job["id"], "k-dead").json()["leases"]
    # Its server was killed before the answer was stored: the record stays
    # unanswered, and the session that wrote it (pid 0: none) is gone.
    TakeRequest.objects.filter(key="k-dead").update(whole=False, answer=None, backend=0)
    again = post_take(worker_client, job["id"], "k-dead")
    assert again.status_code == 200
    assert [lease["id"] for lease in again.json()["leases"]] == [lease["id"] for lease in first]
    assert leased(job["id"]) == len(first) == 2  # nothing more


def test_a_take_that_raises_leaves_no_claim_behind(worker_client, admin_client, job_name):
    job = create_job(worker_client, job_name, ["/a"])
    admin_client.post(f"/api/v1/jobs/{job['id']}/cancel/")
    for _ in range(2):  # the repeat runs again and says the same
        response = post_take(worker_client, job["id"], "k-cancelled")
        assert response.status_code == 409 and response.json()["error"] == "job_cancelled"
    assert not TakeRequest.objects.filter(job_id=job["id"]).exists()


@pytest.mark.parametrize("key", ["", "x" * 65, "no spaces", "ключ"])
def test_a_malformed_key_is_refused_and_leases_nothing(worker_client, job_name, key):
    job = create_job(worker_client, job_name, ["/a"])
    response = post_take(worker_client, job["id"], key)
    if key == "":
        assert response.status_code == 200  # an empty header is no key
        return
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["message"]
    assert leased(job["id"]) == 0 and not TakeRequest.objects.filter(job_id=job["id"]).exists()


def test_old_keys_of_a_worker_are_dropped_by_its_next_take(worker_client, job_name):
    from datetime import timedelta

    job = create_job(worker_client, job_name, ["/a", "/b", "/c"])
    holder = Job.objects.get(pk=job["id"]).created_by_id
    an_hour_ago = _now() - timedelta(hours=1)
    TakeRequest.objects.create(
        job_id=job["id"], holder=holder, key="k-old", worker="w1", answer={}, created_at=an_hour_ago
    )
    TakeRequest.objects.create(
        job_id=job["id"], holder=holder, key="k-other", worker="w2", answer={}, created_at=an_hour_ago
    )
    post_take(worker_client, job["id"], "k-new")
    assert set(TakeRequest.objects.filter(job_id=job["id"]).values_list("key", flat=True)) == {"k-other", "k-new"}


def _backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _now():
    from django.utils import timezone

    return timezone.now()


@pytest.mark.parametrize("key", [None, "k-none"])
def test_a_take_on_no_job_is_a_4xx_with_or_without_a_key(worker_client, key):
    assert post_take(worker_client, 987654321, key).status_code == 404
    assert not TakeRequest.objects.filter(key="k-none").exists()
    # Last: the refused statement ends the test's transaction.
    response = post_take(worker_client, 2**70, key)
    assert response.status_code == 400 and "out of the range" in response.json()["message"]
