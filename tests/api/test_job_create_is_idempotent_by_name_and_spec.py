import pytest

from server.models import Item, Job, Unit

pytestmark = pytest.mark.django_db

WORKS = ["/a", "/b", "/c"]


def post(client, **body):
    return client.post("/api/v1/jobs/", body, format="json")


def test_same_name_and_spec_returns_the_existing_job(worker_client, job_name):
    first = post(worker_client, name=job_name, works=WORKS, num_epochs=2, seed=5)
    second = post(worker_client, name=job_name, works=WORKS, num_epochs=2, seed=5)
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"]
    assert Job.objects.filter(name=job_name).count() == 1
    assert Unit.objects.filter(job_id=first.json()["id"]).count() == 3
    assert Item.objects.filter(job_id=first.json()["id"]).count() == 3


def test_lease_settings_are_not_part_of_the_identity(worker_client, job_name):
    first = post(worker_client, name=job_name, works=WORKS, lease_timeout=30)
    second = post(worker_client, name=job_name, works=WORKS, lease_timeout=90, max_attempts=7)
    assert second.status_code == 200
    assert second.json()["lease_timeout"] == 30 == first.json()["lease_timeout"]


@pytest.mark.parametrize(
    "change, field",
    [
        ({"works": ["/a", "/b"]}, "works"),
        ({"works": ["/a", "/c", "/b"]}, "works"),
        ({"num_epochs": 3}, "num_epochs"),
        ({"shuffle": False}, "shuffle"),
        ({"seed": 6}, "seed"),
        ({"prefix": "s3://bucket/"}, "prefix"),
        ({"num_slices": 10}, "num_slices"),
    ],
)
def test_same_name_with_a_different_spec_is_a_409_naming_the_field(worker_client, job_name, change, field):
    base = {"name": job_name, "works": WORKS, "num_epochs": 2, "seed": 5}
    assert post(worker_client, **base).status_code == 201
    response = post(worker_client, **{**base, **change})
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "job_spec_conflict"
    assert body["fields"] == [field]
    assert field in body["message"] and job_name in body["message"]
    assert Job.objects.filter(name=job_name).count() == 1


def test_several_differences_are_all_named(worker_client, job_name):
    post(worker_client, name=job_name, works=WORKS)
    response = post(worker_client, name=job_name, works=["/z"], num_epochs=4, shuffle=False)
    assert response.json()["fields"] == ["works", "num_epochs", "shuffle"]


def test_a_run_is_part_of_the_name_and_kept_as_said(worker_client, job_name):
    first = post(worker_client, name=job_name, run="v2", works=WORKS)
    assert first.status_code == 201, first.content
    assert (first.json()["name"], first.json()["queue"], first.json()["run"]) == (f"{job_name}.v2", job_name, "v2")
    # Another run of the queue is another job; the same run attaches, also
    # when an older SDK sends the whole name: the first create's fields stay.
    other = post(worker_client, name=job_name, run="v3", works=WORKS)
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
    again = post(worker_client, name=f"{job_name}.v2", works=WORKS)
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert Job.objects.get(id=first.json()["id"]).run == "v2"
