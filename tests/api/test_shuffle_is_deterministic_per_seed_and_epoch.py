import pytest

from .helpers import create_job, drain

pytestmark = pytest.mark.django_db

WORKS = [f"/data/part-{i:04d}" for i in range(200)]
PINNED_SEED_1234 = [
    "/data/part-0024",
    "/data/part-0097",
    "/data/part-0147",
    "/data/part-0017",
    "/data/part-0048",
    "/data/part-0190",
    "/data/part-0123",
    "/data/part-0172",
]


def test_the_same_seed_gives_the_same_order_on_every_run(worker_client, job_name):
    first = create_job(worker_client, job_name + "-a", WORKS, seed=1234, num_epochs=2)
    second = create_job(worker_client, job_name + "-b", WORKS, seed=1234, num_epochs=2)
    assert drain(worker_client, first["id"], count=7) == drain(worker_client, second["id"], count=3)


def test_each_epoch_has_its_own_permutation(worker_client, job_name):
    job = create_job(worker_client, job_name, WORKS, seed=99, num_epochs=3)
    order = drain(worker_client, job["id"], count=50)
    epochs = [order[i * len(WORKS) : (i + 1) * len(WORKS)] for i in range(3)]
    for epoch in epochs:
        assert sorted(epoch) == sorted(WORKS)
        assert epoch != WORKS
    assert epochs[0] != epochs[1] != epochs[2] != epochs[0]


def test_different_seeds_give_different_orders(worker_client, job_name):
    first = create_job(worker_client, job_name + "-a", WORKS, seed=1)
    second = create_job(worker_client, job_name + "-b", WORKS, seed=2)
    assert drain(worker_client, first["id"]) != drain(worker_client, second["id"])


def test_without_a_seed_the_server_draws_one_and_every_worker_attaches_to_it(worker_client, job_name):
    job = create_job(worker_client, job_name, WORKS)
    assert isinstance(job["seed"], int)
    again = worker_client.post("/api/v1/jobs/", {"name": job_name, "works": WORKS}, format="json")
    assert again.status_code == 200
    assert again.json()["id"] == job["id"] and again.json()["seed"] == job["seed"]
    # A job with the drawn seed given explicitly hands out the same order.
    twin = create_job(worker_client, job_name + "-twin", WORKS, seed=job["seed"])
    assert drain(worker_client, job["id"]) == drain(worker_client, twin["id"])


def test_the_order_is_pinned_across_servers_and_versions(worker_client, job_name):
    # A run resumed on another server (or after an upgrade) must see the same
    # permutation: the order is hashint8extended(index, hashint8extended(epoch,
    # seed)), Postgres's stable hash. These are its first items for seed 1234.
    job = create_job(worker_client, job_name, WORKS, seed=1234)
    assert drain(worker_client, job["id"], count=50)[:8] == PINNED_SEED_1234


def test_the_largest_seed_is_accepted(worker_client, job_name):
    job = create_job(worker_client, job_name, WORKS, seed=2**63 - 1)
    assert sorted(drain(worker_client, job["id"], count=50)) == WORKS
