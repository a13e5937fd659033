import csv
import io

import pytest

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


@pytest.fixture
def audited_job(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(6)], shuffle=False, num_epochs=2)
    # alpha completes 3 items of epoch 0, beta completes 2 and holds 1; epoch 1 stays pending.
    for worker, count in (("alpha", 3), ("beta", 3)):
        leases = take(worker_client, job["id"], worker, count)["leases"]
        done = leases if worker == "alpha" else leases[:2]
        take(
            worker_client,
            job["id"],
            worker,
            count=1,
            complete=[{"id": lease["id"], "token": lease["token"], "records": 5} for lease in done],
        )
    return job


def rows(client, job_id, query=""):
    response = client.get(f"/api/v1/jobs/{job_id}/items/{query}")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_audit_rows_carry_who_did_what_and_when(viewer_client, audited_job):
    done = rows(viewer_client, audited_job["id"], "?state=done")
    assert sorted(r["worker"] for r in done) == ["alpha", "alpha", "alpha", "beta", "beta"]
    for row in done:
        assert row["item"].startswith("/d/") and row["attempts"] == 1 and row["records"] == 5
        assert row["completed_at"] >= row["leased_at"] and row["duration"] >= 0


def test_audit_filters_by_state_epoch_and_worker(viewer_client, audited_job):
    job_id = audited_job["id"]
    assert len(rows(viewer_client, job_id, "?worker=beta")) == 4  # 2 done, 1 leased, 1 from the completing take
    assert {r["state"] for r in rows(viewer_client, job_id, "?worker=beta&state=leased")} == {"leased"}
    assert {r["epoch"] for r in rows(viewer_client, job_id, "?epoch=1")} == {1}
    assert rows(viewer_client, job_id, "?worker=nobody") == []


def test_bad_filters_are_a_400(viewer_client, audited_job):
    for query in ("?state=bogus", "?epoch=-1", "?epoch=x", "?format=xml"):
        response = viewer_client.get(f"/api/v1/jobs/{audited_job['id']}/items/{query}")
        assert response.status_code == 400, query


def test_csv_export_streams_the_same_selection(viewer_client, audited_job):
    response = viewer_client.get(f"/api/v1/jobs/{audited_job['id']}/items/?format=csv&state=done")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response.streaming
    body = b"".join(response.streaming_content).decode()
    table = list(csv.DictReader(io.StringIO(body)))
    assert len(table) == 5
    assert {r["state"] for r in table} == {"done"}
    assert sorted(r["worker"] for r in table) == ["alpha", "alpha", "alpha", "beta", "beta"]
    assert list(table[0]) == [
        "id",
        "item",
        "epoch",
        "position",
        "state",
        "attempts",
        "worker",
        "leased_at",
        "completed_at",
        "duration",
        "records",
        "error",
    ]


def test_audit_pages_with_a_cursor(viewer_client, audited_job):
    first = viewer_client.get(f"/api/v1/jobs/{audited_job['id']}/items/?page_size=4").json()
    assert len(first["results"]) == 4 and first["next"]
    second = viewer_client.get(first["next"]).json()
    ids = [r["id"] for r in first["results"] + second["results"]]
    assert len(ids) == len(set(ids))


def test_workers_are_listed_with_items_done_and_mean_time(viewer_client, audited_job):
    workers = viewer_client.get(f"/api/v1/workers/?job={audited_job['id']}").json()["results"]
    by_name = {w["name"]: w for w in workers}
    assert by_name["alpha"]["items_done"] == 3 and by_name["beta"]["items_done"] == 2
    assert by_name["alpha"]["mean_item_seconds"] is not None
