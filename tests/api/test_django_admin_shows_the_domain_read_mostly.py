import pytest
from django.contrib.auth import get_user_model

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    admin = get_user_model().objects.create_superuser("root-admin", "", "pw-for-tests-only")
    client.force_login(admin)
    return client


def test_admin_lists_jobs_items_workers_and_events(staff_client, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"])
    take(worker_client, job["id"], "admin-visible-worker")
    for path in (
        "/admin/shardline/job/",
        "/admin/shardline/item/",
        "/admin/shardline/worker/",
        "/admin/shardline/event/",
        "/admin/shardline/apitoken/",
        f"/admin/shardline/job/{job['id']}/change/",
    ):
        response = staff_client.get(path)
        assert response.status_code == 200, path
    assert job_name in staff_client.get("/admin/shardline/job/").content.decode()
    assert "admin-visible-worker" in staff_client.get("/admin/shardline/worker/").content.decode()


def test_admin_cannot_add_or_delete_jobs(staff_client, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"])
    assert staff_client.get("/admin/shardline/job/add/").status_code == 403
    assert staff_client.post(f"/admin/shardline/job/{job['id']}/delete/", {"post": "yes"}).status_code == 403
