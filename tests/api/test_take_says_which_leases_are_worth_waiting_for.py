"""At the end of a job, a take that gets nothing says how many leases are worth waiting for.

A lease is worth waiting for when it may still come back to the caller: its
holder reads for another consumer that is not itself waiting, or it expired.
Leases of the caller's own consumer, and of consumers that wait too, are not:
those consumers may be waiting on the caller (a DataLoader taking from its
loaders in turn), so waiting for them could wait forever.
"""

import pytest
from django.db import connection

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


def take_as(client, job_id, worker, consumer=None, complete=()):
    body = {"worker": worker, "complete": list(complete)}
    if consumer is not None:
        body["consumer"] = consumer
    response = client.post(f"/api/v1/jobs/{job_id}/leases/", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def waiting_since(job_id, worker):
    with connection.cursor() as cursor:
        cursor.execute("SELECT waiting_since FROM shardline_worker WHERE job_id = %s AND name = %s", [job_id, worker])
        return cursor.fetchone()[0]


def test_a_lease_of_a_consumer_that_reads_is_worth_waiting_for(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"])
    take_as(worker_client, job["id"], "reader")
    idle = take_as(worker_client, job["id"], "idle")
    assert (idle["exhausted"], idle["waiting_on"], idle["leased_by_others"]) == (False, 1, 1)
    assert waiting_since(job["id"], "idle") is not None
    assert waiting_since(job["id"], "reader") is None


def test_a_lease_of_a_consumer_that_waits_too_is_not(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], shuffle=False)
    take_as(worker_client, job["id"], "p")
    take_as(worker_client, job["id"], "q")
    # p holds /a and asks for more: it waits (its consumer may hold /a until
    # this take returns).
    p_waits = take_as(worker_client, job["id"], "p")
    assert p_waits["waiting_on"] == 1  # q's /b: q reads it
    q_at_end = take_as(worker_client, job["id"], "q")
    assert (q_at_end["exhausted"], q_at_end["waiting_on"], q_at_end["retry_after"] > 0) == (False, 0, True)
    # Told it is at its end, q no longer counts as waiting: p waits for /b again.
    assert waiting_since(job["id"], "q") is None
    assert take_as(worker_client, job["id"], "p")["waiting_on"] == 1


def test_loaders_of_one_consumer_do_not_wait_for_each_other(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"])
    take_as(worker_client, job["id"], "main:loader0", consumer="main")
    sibling = take_as(worker_client, job["id"], "main:loader1", consumer="main")
    assert (sibling["waiting_on"], sibling["leased_by_others"]) == (0, 1)
    stranger = take_as(worker_client, job["id"], "other", consumer="other")
    assert stranger["waiting_on"] == 1


def test_an_expired_lease_comes_back_whoever_held_it(worker_client, job_name, service_time):
    job = create_job(worker_client, job_name, ["/a", "/b"], shuffle=False)
    take_as(worker_client, job["id"], "p")
    q = take_as(worker_client, job["id"], "q")["leases"][0]
    take_as(worker_client, job["id"], "p")  # p waits: its /a is not worth waiting for
    # q heartbeats half way through the timeout; p no longer does.
    service_time.advance(job["lease_timeout"] / 2)
    beat = {"leases": [{"id": q["id"], "token": q["token"]}]}
    assert worker_client.post("/api/v1/leases/extend/", beat, format="json").status_code == 200
    service_time.advance(job["lease_timeout"] / 2 + 1)
    # p died waiting: its lease is taken back and handed over by the same take.
    leases = take_as(worker_client, job["id"], "q")["leases"]
    assert [lease["item"] for lease in leases] == ["/a"]


def test_a_heartbeat_says_whether_the_holder_waits(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"])
    lease = take_as(worker_client, job["id"], "holder")["leases"][0]
    ref = {"id": lease["id"], "token": lease["token"]}
    assert take_as(worker_client, job["id"], "idle")["waiting_on"] == 1
    # The holder's process waits at the end of another queue: its lease here
    # may never be finished while that lasts.
    assert (
        worker_client.post("/api/v1/leases/extend/", {"leases": [ref], "waiting": True}, format="json").status_code
        == 200
    )
    assert take_as(worker_client, job["id"], "idle")["waiting_on"] == 0
    worker_client.post("/api/v1/leases/extend/", {"leases": [ref]}, format="json")  # no mark: unchanged
    assert take_as(worker_client, job["id"], "idle")["waiting_on"] == 0
    worker_client.post("/api/v1/leases/extend/", {"leases": [ref], "waiting": False}, format="json")
    assert take_as(worker_client, job["id"], "idle")["waiting_on"] == 1


def test_a_heartbeat_keeps_the_holder_seen(worker_client, job_name, service_time):
    job = create_job(worker_client, job_name, ["/a"])
    lease = take_as(worker_client, job["id"], "holder")["leases"][0]
    service_time.advance(job["lease_timeout"] / 2)  # last seen at the take, half a timeout ago
    worker_client.post(
        "/api/v1/leases/extend/", {"leases": [{"id": lease["id"], "token": lease["token"]}]}, format="json"
    )
    worker = worker_client.get(f"/api/v1/workers/?job={job['id']}").json()["results"][0]
    assert worker["name"] == "holder"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM shardline_now() - last_seen) FROM shardline_worker WHERE job_id = %s",
            [job["id"]],
        )
        assert cursor.fetchone()[0] < 1


def test_leasing_an_item_ends_the_wait(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], shuffle=False)
    a = take(worker_client, job["id"], "p", count=2)["leases"][0]
    take_as(worker_client, job["id"], "q")
    assert waiting_since(job["id"], "q") is not None
    worker_client.post(f"/api/v1/leases/{a['id']}/fail/", {"token": a["token"], "error": "x"}, format="json")
    assert take_as(worker_client, job["id"], "q")["leases"][0]["item"] == "/a"
    assert waiting_since(job["id"], "q") is None


def test_a_take_that_leaves_when_it_finds_nothing_never_counts_as_waiting(worker_client, job_name):
    # A loader of a DataLoader in order whose sibling reads: should it find
    # nothing, it leaves. Its consumer reads, so its other leases stay worth
    # waiting for, and it asks no split of what others hold.
    job = create_job(worker_client, job_name, ["/a?start=0&end=100", "/b?start=0&end=100"], shuffle=False)
    take_as(worker_client, job["id"], "main:loader0", consumer="main")
    take_as(worker_client, job["id"], "other")
    body = {"worker": "main:loader1", "consumer": "main", "leave": True}
    response = worker_client.post(f"/api/v1/jobs/{job['id']}/leases/", body, format="json")
    assert response.status_code == 200, response.content
    left = response.json()
    assert (left["leases"], left["exhausted"], left["waiting_on"]) == ([], False, 1)
    assert waiting_since(job["id"], "main:loader1") is None
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM shardline_item WHERE job_id = %s AND split_for IS NOT NULL", [job["id"]])
        assert cursor.fetchone()[0] == 0
    # The other consumer's take still waits for main's lease: main reads it.
    assert take_as(worker_client, job["id"], "other")["waiting_on"] == 1


def test_leave_is_true_or_false(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"])
    response = worker_client.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "w", "leave": "yes"}, format="json")
    assert response.status_code == 400 and "leave" in response.json()["fields"], response.content
