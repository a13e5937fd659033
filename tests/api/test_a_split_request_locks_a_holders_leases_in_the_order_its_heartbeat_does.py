"""An idle worker's split request and its holder's heartbeat lock the holder's leases in one order: no deadlock.

One request asks several leases of a slow consumer (a dataset's slots share
one worker), and a heartbeat or a take that completes several leases locks
its rows in id order (extend.sql, take.sql). The request updated its rows in
the order its scan met them; with the higher id first it waited on the
heartbeat while the heartbeat waited on it, and Postgres broke the deadlock
with an error: the take answered 503. The interleaving is forced here: the
"heartbeat" (another connection, locking as extend.sql does) holds the lower
id while the take runs, then takes the higher.
"""

import threading

import psycopg
import pytest
from django.db import connection, connections
from rest_framework.test import APIClient

from tests.support import wait_until

from .helpers import create_job
from .test_a_split_hands_unread_records_to_an_idle_worker import began_seconds_ago, extend, take_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def another_connection() -> psycopg.Connection:
    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"] or None, port=db["PORT"] or None, dbname=db["NAME"], user=db["USER"], password=db["PASSWORD"]
    )


def waiting_on_a_lock(observer: psycopg.Connection) -> int:
    return observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
    ).fetchone()[0]


def idle_take(worker_client, job_id: int, answers: list) -> None:
    """An idle worker's take in a request (and a connection) of its own: its (status, answer) goes to ``answers``."""
    client = APIClient()
    client.credentials(**worker_client._credentials)
    try:
        response = client.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "idle", "consumer": "idle"}, format="json")
        answers.append((response.status_code, response.json()))
    finally:
        connections.close_all()


@pytest.mark.parametrize("first_in_scan", ["lower id", "higher id"])
def test_a_request_for_two_leases_of_one_holder_waits_for_its_heartbeat_and_then_asks_both(
    worker_client, job_name, first_in_scan
):
    works = [f"/{name}.csv?start=0&end=10000" for name in ("f", "g", "h")]
    job = create_job(worker_client, job_name, works, shuffle=False)
    slots = [take_for(worker_client, job["id"], "tf", "tf") for _ in range(2)]  # one worker's two slots
    fast = take_for(worker_client, job["id"], "fast", "fast")
    for lease in slots:
        extend(worker_client, lease, position=500)
        began_seconds_ago(lease["id"], 10)  # 50 records/s: both would finish long after the others
    extend(worker_client, fast, position=3000)
    began_seconds_ago(fast["id"], 1)
    low, high = sorted(lease["id"] for lease in slots)
    with connection.cursor() as cursor:  # which one the request's scan meets first: the earlier expiry
        cursor.execute(
            "UPDATE shardline_item SET expires_at = expires_at - interval '5 seconds' WHERE id = %s",
            [low if first_in_scan == "lower id" else high],
        )

    heartbeat, observer = another_connection(), another_connection()
    observer.autocommit = True
    heartbeat.execute("SET deadlock_timeout = '100ms'")
    heartbeat.execute("SELECT id FROM shardline_item WHERE id = %s FOR UPDATE", [low])
    answers = []
    taker = threading.Thread(target=idle_take, args=(worker_client, job["id"], answers))
    taker.start()
    try:
        wait_until(lambda: waiting_on_a_lock(observer) >= 1, 20, 0.02, "the take waiting on the heartbeat's lock")
        heartbeat.execute("SET lock_timeout = '10s'")
        heartbeat.execute("SELECT id FROM shardline_item WHERE id = %s FOR UPDATE", [high])  # no deadlock here
        heartbeat.commit()
        taker.join(30)
    finally:
        heartbeat.close()
        observer.close()
    assert len(answers) == 1 and answers[0][0] == 200, answers
    assert answers[0][1]["leases"] == [] and answers[0][1]["retry_after"] <= 0.5  # a split is coming: wait, briefly
    asked = {}
    for lease in slots:
        asked.update(extend(worker_client, lease)["splits"])
    assert sorted(asked) == sorted(str(lease["id"]) for lease in slots)


def test_a_request_whose_chosen_lease_another_worker_asked_first_still_says_the_others_split_is_coming(
    worker_client, job_name
):
    works = [f"/{name}.csv?start=0&end=10000" for name in ("f", "g", "h")]
    job = create_job(worker_client, job_name, works, shuffle=False)
    last = take_for(worker_client, job["id"], "slow:loader0:1", "slow")
    sibling = take_for(worker_client, job["id"], "slow:loader1:1", "slow")
    fast = take_for(worker_client, job["id"], "fast", "fast")
    extend(worker_client, last, position=400)
    began_seconds_ago(last["id"], 10)  # 40 records/s: it would finish last, so it is chosen
    extend(worker_client, sibling, position=500)
    began_seconds_ago(sibling["id"], 10)
    extend(worker_client, fast, position=3000)
    began_seconds_ago(fast["id"], 1)

    other, observer = another_connection(), another_connection()
    observer.autocommit = True
    # Another idle worker's request for the chosen lease, not committed yet.
    other.execute(
        "UPDATE shardline_item SET split_at = 900, split_for = 'other', split_asked_at = now() WHERE id = %s",
        [last["id"]],
    )
    answers = []
    taker = threading.Thread(target=idle_take, args=(worker_client, job["id"], answers))
    taker.start()
    try:
        wait_until(lambda: waiting_on_a_lock(observer) >= 1, 20, 0.02, "the take waiting on the other request")
        other.commit()
        taker.join(30)
    finally:
        other.close()
        observer.close()
    assert len(answers) == 1 and answers[0][0] == 200, answers
    with connection.cursor() as cursor:
        cursor.execute("SELECT split_for FROM shardline_item WHERE id = %s", [sibling["id"]])
        assert cursor.fetchone()[0] == "idle"  # the sibling asked for this worker...
    assert answers[0][1]["retry_after"] <= 0.5  # ...and its take knows a split is coming (1 s when none is)
