import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from server.models import ItemHistory, Snapshot

from .helpers import create_job, snapshot, take_and_complete

pytestmark = pytest.mark.django_db


def test_snapshot_records_the_newest_completion_and_ids_increase(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(6)], num_epochs=2, shuffle=False)
    first = snapshot(worker_client, job["id"])
    assert first["seq"] == 0 and first["job"] == job["id"] and first["created_at"]
    assert first["epochs_materialised"] == 1
    leases = take_and_complete(worker_client, job["id"], 3)
    second = snapshot(worker_client, job["id"], worker="chief")
    newest = max(i.seq for i in Snapshot.objects.get(pk=second["id"]).job.item_set.filter(seq__isnull=False))
    assert second["seq"] == newest > first["seq"]
    assert second["id"] > first["id"] and second["worker"] == "chief"
    assert len(leases) == 3 and not ItemHistory.objects.exists()


def test_snapshot_costs_the_same_queries_for_a_small_and_a_large_job(worker_client, job_name):
    small = create_job(worker_client, job_name + "-s", [f"/d/{i}" for i in range(3)])
    large = create_job(worker_client, job_name + "-l", [f"/d/{i}" for i in range(3000)])
    for job in (small, large):
        take_and_complete(worker_client, job["id"], 2)
    counts = []
    for job in (small, large):
        with CaptureQueriesContext(connection) as queries:
            snapshot(worker_client, job["id"])
        # Reads of items: the statement runs prepared (EXECUTE
        # shardline_newest_completion), its PREPARE once per connection.
        reads = [q["sql"] for q in queries if "shardline_item" in q["sql"] or "newest_completion" in q["sql"]]
        counts.append(len([text for text in reads if not text.startswith("PREPARE")]))
    assert counts[0] == counts[1] == 1


def test_the_newest_completion_is_read_from_the_completion_index(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(50)])
    take_and_complete(worker_client, job["id"], 2)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # the table is tiny; ask what the index can do
        cursor.execute(
            "EXPLAIN SELECT coalesce(max(seq), 0) FROM shardline_item WHERE job_id = %s AND seq IS NOT NULL",
            [job["id"]],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "item_completion_seq" in plan and "Sort" not in plan, plan
