import pytest

from .helpers import create_job, drain, take

pytestmark = pytest.mark.django_db


@pytest.mark.smoke
def test_unshuffled_items_come_in_works_order_epoch_after_epoch(worker_client, job_name):
    works = [f"/d/{i}" for i in range(7)]
    job = create_job(worker_client, job_name, works, shuffle=False, num_epochs=3)
    assert drain(worker_client, job["id"], count=2) == works * 3


def test_each_lease_carries_epoch_position_and_a_token(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], shuffle=False, num_epochs=2)
    leases = take(worker_client, job["id"], count=4)["leases"]
    assert [(lease["epoch"], lease["position"], lease["item"]) for lease in leases] == [
        (0, 0, "/a"),
        (0, 1, "/b"),
        (1, 0, "/a"),
        (1, 1, "/b"),
    ]
    assert len({lease["token"] for lease in leases}) == 4


def test_prefix_is_joined_to_each_item_and_works_are_stripped(worker_client, job_name):
    job = create_job(worker_client, job_name, ["  part-0 ", "part-1\n"], shuffle=False, prefix="hdfs://nn/data/")
    assert drain(worker_client, job["id"]) == ["hdfs://nn/data/part-0", "hdfs://nn/data/part-1"]


def test_later_epochs_are_materialised_only_when_reached(worker_client, job_name):
    from server.models import Item

    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(5)], num_epochs=100)
    assert Item.objects.filter(job_id=job["id"]).count() == 5
    take(worker_client, job["id"], count=6)
    assert Item.objects.filter(job_id=job["id"]).count() == 10
    assert set(Item.objects.filter(job_id=job["id"]).values_list("epoch", flat=True)) == {0, 1}


def test_a_batch_take_spans_several_small_epochs(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], shuffle=False, num_epochs=5)
    result = take(worker_client, job["id"], count=32)
    assert [lease["item"] for lease in result["leases"]] == ["/a", "/b"] * 5
