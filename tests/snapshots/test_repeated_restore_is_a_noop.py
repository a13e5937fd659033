import pytest

from server.models import Event, SnapshotRestore

from .helpers import create_job, restore, snapshot, states, take, take_and_complete

pytestmark = pytest.mark.django_db


def test_restoring_the_same_snapshot_again_with_no_completions_since_changes_nothing(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(6)], shuffle=False)
    snap = snapshot(worker_client, job["id"])
    take_and_complete(worker_client, job["id"], 2)
    first = restore(worker_client, job["id"], snap["id"], worker="chief")
    # Workers of the restarted run restore too, some after the run began leasing.
    lease = take(worker_client, job["id"], "w1")["leases"][0]
    repeats = [restore(worker_client, job["id"], snap["id"], worker=f"w{i}") for i in range(3)]

    for repeat in repeats:
        assert repeat == {**first, "repeated": True}
    assert states(job["id"])[lease["id"]] == "leased"
    assert SnapshotRestore.objects.filter(job_id=job["id"]).count() == 1
    assert Event.objects.filter(job_id=job["id"], kind="restored").count() == 1


def test_a_repeat_after_new_completions_rolls_them_back_again(worker_client, job_name):
    # A second crash that restarts from the same checkpoint.
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(6)], shuffle=False)
    snap = snapshot(worker_client, job["id"])
    take_and_complete(worker_client, job["id"], 2)
    first = restore(worker_client, job["id"], snap["id"])
    take_and_complete(worker_client, job["id"], 3)
    second = restore(worker_client, job["id"], snap["id"])
    assert second["id"] != first["id"] and not second["repeated"] and second["reopened"] == 3
    assert set(states(job["id"]).values()) == {"pending"}


def test_a_repeat_with_the_same_generation_is_a_noop_even_after_new_completions(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(6)], shuffle=False)
    snap = snapshot(worker_client, job["id"])
    take_and_complete(worker_client, job["id"], 2)
    first = restore(worker_client, job["id"], snap["id"], generation="attempt-2")
    take_and_complete(worker_client, job["id"], 3)
    late = restore(worker_client, job["id"], snap["id"], generation="attempt-2")
    assert late == {**first, "repeated": True}
    assert list(states(job["id"]).values()).count("done") == 3
    third = restore(worker_client, job["id"], snap["id"], generation="attempt-3")
    assert not third["repeated"] and third["reopened"] == 3
