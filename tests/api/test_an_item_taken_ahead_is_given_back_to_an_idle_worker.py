"""Items taken ahead of their consumer (``ahead``), through the API: asked back for an idle worker until started.

The SDK's look-ahead (worker_sdk.look_ahead) leases a consumer's next item
while it reads the current one. An idle worker's take asks for such an item
(services/give_back.py), the holder's heartbeat hears it, and the holder
gives it back unread; a take naming it ``started`` ends that.
"""

from datetime import timedelta

import pytest
from django.db import connection

from server.models import Worker

from .helpers import complete, create_job

pytestmark = pytest.mark.django_db


def paced(job_id, *workers):
    """The workers have finished an item each (1 s): near a job's end, a take ahead needs its worker's pace."""
    Worker.objects.filter(job_id=job_id, name__in=workers).update(items_done=1, records_done=1, busy_seconds=1.0)


def take(client, job_id, worker, **fields):
    response = client.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": worker, **fields}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def extend(client, *leases):
    body = {"leases": [{"id": lease["id"], "token": lease["token"]} for lease in leases]}
    response = client.post("/api/v1/leases/extend/", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def release(client, lease, reason="given back"):
    return client.post(
        f"/api/v1/leases/{lease['id']}/release/", {"token": lease["token"], "reason": reason}, format="json"
    )


def row(lease_id):
    with connection.cursor() as cursor:
        cursor.execute("SELECT state, ahead, split_for, attempts, worker FROM shardline_item WHERE id = %s", [lease_id])
        return cursor.fetchone()


def times(lease_id):
    with connection.cursor() as cursor:
        cursor.execute("SELECT leased_at, expires_at FROM shardline_item WHERE id = %s", [lease_id])
        return cursor.fetchone()


def waiting(job_id, worker):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT waiting_since IS NOT NULL FROM shardline_worker WHERE job_id = %s AND name = %s", [job_id, worker]
        )
        return cursor.fetchone()[0]


def test_an_idle_workers_take_asks_for_the_item_taken_ahead_and_gets_it_once_given_back(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/a", "/data/b"], shuffle=False)
    current = take(worker_client, job["id"], "slow")["leases"][0]
    paced(job["id"], "slow")
    ahead = take(worker_client, job["id"], "slow", ahead=True)["leases"][0]
    assert row(ahead["id"])[:2] == ("leased", True)
    assert extend(worker_client, current, ahead)["give_back"] == []

    idle = take(worker_client, job["id"], "fast")
    assert (idle["leases"], idle["exhausted"]) == ([], False)
    assert idle["waiting_on"] >= 1 and idle["retry_after"] <= 0.5  # something is coming: wait, briefly
    assert row(ahead["id"])[2] == "fast"

    # The holder hears it with a heartbeat that did not carry the lease, too
    # (taken after the held heartbeat left).
    assert extend(worker_client, current)["give_back"] == [ahead["id"]]
    assert extend(worker_client, current, ahead)["give_back"] == [ahead["id"]]
    assert release(worker_client, ahead).status_code == 200
    assert row(ahead["id"])[:2] == ("pending", True) and row(ahead["id"])[3] == 0  # its attempt returned

    got = take(worker_client, job["id"], "fast")["leases"][0]
    assert got["item"] == "/data/b" and row(got["id"])[1:3] == (False, None)  # a lease of its own, not ahead


def test_a_started_item_is_not_asked_back_and_an_ask_before_it_is_dropped(worker_client, job_name, service_time):
    job = create_job(worker_client, job_name, ["/data/a", "/data/b", "/data/c"], shuffle=False)
    first = take(worker_client, job["id"], "slow")["leases"][0]
    paced(job["id"], "slow")
    second = take(worker_client, job["id"], "slow", ahead=True)["leases"][0]
    take(worker_client, job["id"], "other")  # leases /data/c
    idle = take(worker_client, job["id"], "fast")
    assert idle["leases"] == [] and row(second["id"])[2] == "fast"

    # The consumer started it before the request reached the holder: its
    # next take says so, completing the first, and the request is gone.
    leased_at, expires_at = times(second["id"])
    service_time.advance(3)  # it waited 3 s behind the first
    answer = take(
        worker_client,
        job["id"],
        "slow",
        ahead=True,
        started=[second["id"]],
        complete=[{"id": first["id"], "token": first["token"]}],
    )
    assert answer["completed"] == [first["id"]] and answer["leases"] == []
    assert row(second["id"])[1:3] == (False, None)
    # Its lease time counts from its start; its expiry stays (only a
    # heartbeat extends a lease: holder_gone.sql tells a dead holder's
    # leases from a live one's by that).
    assert times(second["id"]) == (leased_at + timedelta(seconds=3), expires_at)
    assert extend(worker_client, second)["give_back"] == []
    again = take(worker_client, job["id"], "fast")
    assert again["leases"] == [] and row(second["id"])[2] is None  # nothing taken ahead to ask for


def test_a_take_ahead_that_finds_nothing_asks_nothing_and_does_not_wait(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/a", "/data/b"], shuffle=False)
    mine = take(worker_client, job["id"], "reader")["leases"][0]
    take(worker_client, job["id"], "other", ahead=True)  # registers it: its pace is not known yet
    paced(job["id"], "other")
    other = take(worker_client, job["id"], "other", ahead=True)["leases"][0]

    answer = take(worker_client, job["id"], "reader", ahead=True)
    assert answer["leases"] == [] and not answer["exhausted"]
    assert row(other["id"])[2] is None  # not asked back: the asker's consumer is still reading
    assert not waiting(job["id"], "reader")  # reading, not waiting: others still wait for its lease
    assert row(mine["id"])[0] == "leased"


def test_started_names_only_the_callers_own_leases_and_a_bad_list_is_a_400(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/a", "/data/b"], shuffle=False)
    take(worker_client, job["id"], "slow", ahead=True)  # registers it: its pace is not known yet
    paced(job["id"], "slow")
    ahead = take(worker_client, job["id"], "slow", ahead=True)["leases"][0]
    take(worker_client, job["id"], "intruder", started=[ahead["id"]])
    assert row(ahead["id"])[1] is True  # another worker's "started" changes nothing

    for started in ("1", [0], [1.5], ["1"], [True], {"id": 1}):
        response = worker_client.post(
            f"/api/v1/jobs/{job['id']}/leases/", {"worker": "slow", "started": started}, format="json"
        )
        assert response.status_code == 400 and "started" in response.json()["fields"], (started, response.content)
    response = worker_client.post(
        f"/api/v1/jobs/{job['id']}/leases/", {"worker": "slow", "ahead": "yes"}, format="json"
    )
    assert response.status_code == 400 and "ahead" in response.json()["fields"]
    assert row(ahead["id"])[:2] == ("leased", True)


def test_a_heartbeat_that_says_the_item_started_refuses_the_give_back(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/a", "/data/b"], shuffle=False)
    current = take(worker_client, job["id"], "slow")["leases"][0]
    paced(job["id"], "slow")
    ahead = take(worker_client, job["id"], "slow", ahead=True)["leases"][0]
    assert take(worker_client, job["id"], "fast")["leases"] == [] and row(ahead["id"])[2] == "fast"

    # The holder's loop had started it: its heartbeat says so (a wrong token says nothing).
    body = {"leases": [{"id": ahead["id"], "token": ahead["token"] + 1, "started": True}]}
    assert worker_client.post("/api/v1/leases/extend/", body, format="json").json()["lost"] == [ahead["id"]]
    assert row(ahead["id"])[1:3] == (True, "fast")
    body = {"leases": [current, {"id": ahead["id"], "token": ahead["token"], "started": True}]}
    body["leases"][0] = {"id": current["id"], "token": current["token"]}
    beat = worker_client.post("/api/v1/leases/extend/", body, format="json").json()
    assert beat["give_back"] == [] and sorted(beat["extended"]) == sorted([str(current["id"]), str(ahead["id"])])
    assert row(ahead["id"])[1:3] == (False, None)
    assert take(worker_client, job["id"], "fast")["leases"] == [] and row(ahead["id"])[2] is None


@pytest.mark.parametrize("by", ["complete", "take"])
def test_an_item_taken_ahead_and_completed_before_any_request_said_it_started_is_ahead_no_more(
    worker_client, job_name, by
):
    # A consumer may read an item taken ahead whole before its next take or
    # heartbeat says it started it (the last item of a job of small slices).
    job = create_job(worker_client, job_name, ["/data/a", "/data/b"], shuffle=False)
    take(worker_client, job["id"], "reader")  # registers it: its pace is not known yet
    paced(job["id"], "reader")
    ahead = take(worker_client, job["id"], "reader", ahead=True)["leases"][0]
    assert row(ahead["id"])[:2] == ("leased", True)
    if by == "complete":
        assert complete(worker_client, ahead).status_code == 200
    else:
        body = {"worker": "reader", "complete": [{"id": ahead["id"], "token": ahead["token"]}]}
        assert take(worker_client, job["id"], **body)["completed"] == [ahead["id"]]
    assert row(ahead["id"])[:2] == ("done", False)


def test_of_several_taken_ahead_together_the_one_its_holder_would_start_last_is_asked(worker_client, job_name):
    # A look-ahead over a quick loop takes several at once and starts them
    # in the order they came: the first is the one it starts next (and would
    # refuse to give back), the last the one it reaches last.
    job = create_job(worker_client, job_name, ["/data/a", "/data/b", "/data/c", "/data/d"], shuffle=False)
    take(worker_client, job["id"], "quick")
    paced(job["id"], "quick")
    ahead = take(worker_client, job["id"], "quick", ahead=True, count=3)["leases"]
    assert [lease["item"] for lease in ahead] == ["/data/b", "/data/c", "/data/d"]
    take(worker_client, job["id"], "idle")
    assert [row(lease["id"])[2] for lease in ahead] == [None, None, "idle"]
