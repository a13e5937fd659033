import random

import pytest
from django.db import connection

from server import selectors
from server.models import Counter, Job

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


def direct_counts(job_id):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT epoch, state, count(*) FROM shardline_item WHERE job_id = %s GROUP BY epoch, state", [job_id]
        )
        return cursor.fetchall()


def test_watermarks_match_the_items_after_a_random_mix_of_operations(worker_client, job_name):
    rng = random.Random(7)
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(40)], num_epochs=3, max_attempts=2)
    held = []
    for _step in range(60):
        result = take(worker_client, job["id"], f"w{rng.randrange(4)}", rng.randrange(1, 4))
        held += result["leases"]
        rng.shuffle(held)
        for lease in held[: rng.randrange(0, len(held) + 1)]:
            verb = rng.choice(["complete", "complete", "fail", "keep"])
            if verb == "keep":
                continue
            body = {"token": lease["token"], "error": "x"} if verb == "fail" else {"token": lease["token"]}
            assert worker_client.post(f"/api/v1/leases/{lease['id']}/{verb}/", body, format="json").status_code == 200
            held.remove(lease)
    marks = worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    expected = {(e, s): 0 for e in range(3) for s in ("pending", "leased", "done", "failed")}
    for epoch, state, count in direct_counts(job["id"]):
        expected[(epoch, state)] = count
    for row in marks["epochs"]:
        if row["materialised"]:
            for state in ("pending", "leased", "done", "failed"):
                assert row[state] == expected[(row["epoch"], state)], (row, state)
        else:
            assert row["pending"] == row["total"] == 40
        assert row["pending"] + row["leased"] + row["done"] + row["failed"] == row["total"]
    assert marks["total"] == 120
    assert marks["done"] == sum(c for (_e, s), c in expected.items() if s == "done")
    # Completions per minute (piggybacked on takes and standalone alike) add
    # up to the items done, and the 30-minute chart shows every one of them.
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(done), 0) FROM shardline_throughput WHERE job_id = %s", [job["id"]])
        assert cursor.fetchone()[0] == marks["done"]
    assert sum(n for _minute, n in selectors.throughput(Job.objects.get(pk=job["id"]))) == marks["done"]


def test_watermarks_report_rate_eta_and_live_workers(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(10)])
    leases = take(worker_client, job["id"], "w1", 4)["leases"]
    take(worker_client, job["id"], "w2", 1, complete=[{"id": lease["id"], "token": lease["token"]} for lease in leases])
    marks = worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    assert marks["done"] == 4 and marks["leased"] == 1 and marks["pending"] == 5
    # Four completions within the last minute (the previous minute's rows
    # weighted by the part of it still inside the window).
    assert abs(marks["rate_per_second"] * 60 - 4) < 0.1
    assert marks["eta_seconds"] > 0
    assert marks["live_workers"] == 2 and marks["current_epoch"] == 0


def test_counter_rows_hold_any_backend_pid(worker_client, job_name):
    # Counter shards are pg_backend_pid(): up to 4,194,304 where a Linux
    # host raises pid_max (the systemd default); a smallint stops at 32,767.
    job = create_job(worker_client, job_name, ["/d/0"])
    Counter.objects.create(job_id=job["id"], epoch=0, shard=4_194_304, pending=0, leased=0, done=0, failed=0)
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()["pending"] == 1
