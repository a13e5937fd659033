"""The counters, completions per minute and worker credit are written by the item trigger (migrations/0010).

Every statement that moves items is counted once, whichever it is; one that
moves none (a heartbeat) writes nothing.
"""

import pytest
from django.db import connection

from server.models import Worker

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


def side_effect_rows(job_id):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM shardline_counter WHERE job_id = %(job)s),"
            "       (SELECT coalesce(sum(pending + leased + done + failed), 0) FROM shardline_counter"
            "         WHERE job_id = %(job)s),"
            "       (SELECT coalesce(sum(done), 0) FROM shardline_throughput WHERE job_id = %(job)s),"
            "       (SELECT xmin::text FROM shardline_counter WHERE job_id = %(job)s"
            "         ORDER BY shard, epoch LIMIT 1)",
            {"job": job_id},
        )
        return cursor.fetchone()


def counted(job_id):
    marks = {"pending": 0, "leased": 0, "done": 0, "failed": 0}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sum(pending), sum(leased), sum(done), sum(failed) FROM shardline_counter WHERE job_id = %s",
            [job_id],
        )
        return dict(zip(marks, (int(v) for v in cursor.fetchone())))


def test_a_heartbeat_writes_no_counter_throughput_or_credit(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(4)])
    leases = take(worker_client, job["id"], "w1", 2)["leases"]
    before = side_effect_rows(job["id"])
    credit = Worker.objects.values_list("items_done", "busy_seconds").get(job_id=job["id"], name="w1")
    response = worker_client.post(
        "/api/v1/leases/extend/", {"leases": [{"id": x["id"], "token": x["token"]} for x in leases]}, format="json"
    )
    assert response.status_code == 200, response.content
    assert len(response.json()["extended"]) == 2
    # Same rows, same totals, and the counter row not even rewritten (xmin).
    assert side_effect_rows(job["id"]) == before
    assert Worker.objects.values_list("items_done", "busy_seconds").get(job_id=job["id"], name="w1") == credit


def test_a_state_change_by_any_statement_is_counted_once(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(5)])
    assert counted(job["id"]) == {"pending": 5, "leased": 0, "done": 0, "failed": 0}
    leases = take(worker_client, job["id"], "w1", 3)["leases"]
    take(worker_client, job["id"], "w1", 1, complete=[{"id": x["id"], "token": x["token"]} for x in leases[:2]])
    assert counted(job["id"]) == {"pending": 1, "leased": 2, "done": 2, "failed": 0}
    worker = Worker.objects.get(job_id=job["id"], name="w1")
    assert worker.items_done == 2 and worker.busy_seconds >= 0
    # A statement the service does not run (an operator's repair in psql)
    # keeps the watermarks true as well.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE shardline_item SET state = 'failed' WHERE id = %s", [leases[2]["id"]])
    assert counted(job["id"]) == {"pending": 1, "leased": 1, "done": 2, "failed": 1}
    marks = worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    assert (marks["pending"], marks["leased"], marks["done"], marks["failed"]) == (1, 1, 2, 1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(done), 0) FROM shardline_throughput WHERE job_id = %s", [job["id"]])
        assert cursor.fetchone()[0] == 2
