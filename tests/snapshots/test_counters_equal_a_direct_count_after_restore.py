import random

import pytest

from .helpers import complete, create_job, direct_counts, restore, snapshot, take

pytestmark = pytest.mark.django_db


def test_watermarks_equal_a_direct_count_after_restores_across_epochs(worker_client, job_name):
    rng = random.Random(3)
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(12)], num_epochs=3, max_attempts=2)
    snapshots, held = [], []
    for step in range(50):
        result = take(worker_client, job["id"], f"w{rng.randrange(3)}", rng.randrange(1, 4))
        held += result["leases"]
        rng.shuffle(held)
        for lease in held[: rng.randrange(0, len(held) + 1)]:
            if rng.random() < 0.8:
                complete(worker_client, lease)
            else:
                worker_client.post(f"/api/v1/leases/{lease['id']}/fail/", {"token": lease["token"]}, format="json")
            held.remove(lease)
        if step % 7 == 0:
            snapshots.append(snapshot(worker_client, job["id"]))
        if step % 13 == 12:
            restore(worker_client, job["id"], rng.choice(snapshots)["id"])
            held = []  # fenced

    restore(worker_client, job["id"], snapshots[len(snapshots) // 2]["id"])
    marks = worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    counts = direct_counts(job["id"])
    for row in marks["epochs"]:
        if row["materialised"]:
            for state in ("pending", "leased", "done", "failed"):
                assert row[state] == counts.get((row["epoch"], state), 0), (row, state)
        assert row["pending"] + row["leased"] + row["done"] + row["failed"] == row["total"] == 12
    assert marks["leased"] == 0
