import random

import pytest
from django.db import connection

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


def test_watermarks_report_rate_eta_and_live_workers(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(10)])
    leases = take(worker_client, job["id"], "w1", 4)["leases"]
    take(worker_client, job["id"], "w2", 1, complete=[{"id": l["id"], "token": l["token"]} for l in leases])
    marks = worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    assert marks["done"] == 4 and marks["leased"] == 1 and marks["pending"] == 5
    assert marks["rate_per_second"] > 0 and marks["eta_seconds"] > 0
    assert marks["live_workers"] == 2 and marks["current_epoch"] == 0
