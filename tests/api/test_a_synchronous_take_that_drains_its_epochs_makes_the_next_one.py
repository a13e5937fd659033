"""A synchronous rank's take that drains the epochs it may read makes the next epoch, so that the next epoch's first takes find it.

Epochs are made as takes reach them. The ranks of synchronous training all
take their first leases of an epoch at its start, at once: when none of
them had made it, they raced, one made it and the others came back with
nothing and took again, a round trip more on the step loop's edge. A take
scoped up to an epoch (``upto_epoch``) that finds those epochs drained
makes the next one instead: one epoch at most per request, never past the
job's last.
"""

import pytest

from .helpers import complete, create_job

pytestmark = pytest.mark.django_db


def take(client, job_id, worker, **fields):
    response = client.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": worker, "sync": True, **fields}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def made(client, job_id):
    return client.get(f"/api/v1/jobs/{job_id}/").json()["epochs_materialised"]


def test_a_take_that_drains_its_epoch_makes_the_next_and_every_rank_leases_from_it_at_once(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], num_epochs=3, shuffle=False)
    first = take(worker_client, job["id"], "rank0", count=5, upto_epoch=0)
    assert [lease["epoch"] for lease in first["leases"]] == [0, 0]
    assert made(worker_client, job["id"]) == 2  # epoch 1 made now, not by the takes at its start
    for lease in first["leases"]:
        assert complete(worker_client, lease).status_code == 200
    ranks = [take(worker_client, job["id"], rank, count=1, upto_epoch=1) for rank in ("rank0", "rank1")]
    assert [[(lease["item"], lease["epoch"]) for lease in answer["leases"]] for answer in ranks] == [
        [("/a", 1)],
        [("/b", 1)],
    ]


def test_a_take_that_leases_all_it_asked_makes_no_epoch(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], num_epochs=3, shuffle=False)
    take(worker_client, job["id"], "rank0", count=1, upto_epoch=0)
    assert made(worker_client, job["id"]) == 1


def test_drained_takes_make_one_epoch_past_their_scope_and_none_past_the_jobs_last(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"], num_epochs=2, shuffle=False)
    for _ in range(3):
        take(worker_client, job["id"], "rank0", count=5, upto_epoch=0)
    assert made(worker_client, job["id"]) == 2
    for _ in range(2):
        take(worker_client, job["id"], "rank0", count=5, upto_epoch=1)
    assert made(worker_client, job["id"]) == 2
