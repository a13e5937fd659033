"""Item history says "leased ... by" for a lease time, and a split names records, items and workers apart.

Found: "completed 12:00:01 by web-w1" where 12:00:01 was the lease time; "records
[460, 500) became 2 items, 65 to 66 for web-w0" read item ids as records and
the worker that asked as the pieces' reader.
"""

import pytest

from tests.api.helpers import complete, create_job, take

pytestmark = pytest.mark.django_db


def test_a_completed_lease_reads_leased_by_then_completed(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"])
    lease = take(worker_client, job["id"], "web-w1")["leases"][0]
    assert complete(worker_client, lease, records=3).status_code == 200
    html = browser_for("viewer").get(f"/jobs/{job['id']}/items/{lease['id']}/").content.decode()
    assert '<span class="badge">completed</span> leased 20' in html and " by web-w1, completed " in html


def test_a_split_into_pieces_names_item_ids_and_the_asking_worker_as_such(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/f.csv?start=400&end=500"])
    held = take(worker_client, job["id"], "web-w1")["leases"][0]
    answer = worker_client.post(
        f"/api/v1/leases/{held['id']}/split/", {"token": held["token"], "at": 460}, format="json"
    )
    assert answer.status_code == 200, answer.content
    remainder = answer.json()["remainder"]
    viewer = browser_for("viewer")
    for page in (f"/jobs/{job['id']}/", f"/jobs/{job['id']}/items/{held['id']}/"):
        html = viewer.get(page).content.decode()
        assert (
            f"split at record 460: web-w1 keeps records [400, 460); records [460, 500) became pending item #{remainder}"
            in html
        ), page


def test_a_split_asked_for_by_an_idle_worker_names_it_as_the_asker_not_the_reader():
    from dashboard.presenters import split_story

    recorded = (
        "split at record 460: the holder keeps [400, 460); records [460, 500) became 2 items, 65 to 66 for web-w0"
    )
    assert split_story(recorded, "web-w1") == (
        "split at record 460: web-w1 keeps records [400, 460); records [460, 500) became pending 2 items, "
        "#65 to #66, asked for by idle worker web-w0"
    )
