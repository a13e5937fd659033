"""A take's from_epoch far past the epochs made so far: each request makes one epoch that is not its own, not all.

Epochs are made (their item rows inserted) as takes reach them. A take
from epoch 9,999 of a 10,000-epoch job once made every epoch before it in
one request (40 s and more, a worker token's way to hold a server worker
and fill the database at once). Now each such request makes one epoch and
asks the caller to come back; the take reaches its epoch by asking on.
"""

import pytest

from .helpers import create_job

pytestmark = pytest.mark.django_db


def take(client, job_id, **fields):
    response = client.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "r0", **fields}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def made(client, job_id):
    return client.get(f"/api/v1/jobs/{job_id}/").json()["epochs_materialised"]


def test_a_take_from_a_far_epoch_makes_one_epoch_and_is_asked_to_retry(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], num_epochs=10_000)
    assert made(worker_client, job["id"]) == 1
    answer = take(worker_client, job["id"], from_epoch=9_999, count=716)
    assert answer["leases"] == [] and answer["exhausted"] is False and answer["retry_after"] > 0
    assert made(worker_client, job["id"]) == 2


def test_a_take_from_a_later_epoch_reaches_it_by_asking_on(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], num_epochs=6, shuffle=False)
    answers = [take(worker_client, job["id"], from_epoch=4, count=5) for _ in range(4)]
    assert [len(answer["leases"]) for answer in answers] == [0, 0, 0, 4]
    assert [(lease["item"], lease["epoch"]) for lease in answers[-1]["leases"]] == [
        ("/a", 4),
        ("/b", 4),
        ("/a", 5),
        ("/b", 5),
    ]
    # What the take skipped is there for takes without the bound, in order.
    rest = take(worker_client, job["id"], count=10)["leases"]
    assert [lease["epoch"] for lease in rest] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_a_take_over_many_small_epochs_still_leases_across_them_in_one_request(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"], num_epochs=5, shuffle=False)
    leases = take(worker_client, job["id"], count=5)["leases"]
    assert [lease["epoch"] for lease in leases] == [0, 1, 2, 3, 4]
