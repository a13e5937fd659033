import pytest

from server.models import Item
from tests.api.helpers import create_job, take

pytestmark = pytest.mark.django_db


@pytest.fixture
def job_with_snapshot(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b", "/c"], shuffle=False)
    first = take(worker_client, job["id"])["leases"][0]
    take(worker_client, job["id"], complete=[{"id": first["id"], "token": first["token"]}])
    snapshot = worker_client.post(f"/api/v1/jobs/{job['id']}/snapshots/", {"worker": "chief"}, format="json").json()
    return job, snapshot


def test_the_job_page_lists_snapshots_and_only_admins_may_restore(browser_for, job_with_snapshot):
    job, snapshot = job_with_snapshot
    viewer_page = browser_for("viewer").get(f"/jobs/{job['id']}/").content.decode()
    assert f"#{snapshot['id']}" in viewer_page and "chief" in viewer_page
    assert "Restore</button>" not in viewer_page
    assert browser_for("viewer").post(f"/jobs/{job['id']}/snapshots/{snapshot['id']}/restore/").status_code == 403
    admin_page = browser_for("admin").get(f"/jobs/{job['id']}/").content.decode()
    assert "Restore</button>" in admin_page and 'data-confirm="Restore snapshot' in admin_page


def test_an_admin_restore_reopens_what_came_after_the_snapshot(browser_for, worker_client, job_with_snapshot):
    job, snapshot = job_with_snapshot
    leased = Item.objects.get(job_id=job["id"], state="leased")
    response = browser_for("admin").post(f"/jobs/{job['id']}/snapshots/{snapshot['id']}/restore/", follow=True)
    html = response.content.decode()
    assert "Restored snapshot" in html and "1 leases taken back" in html
    leased.refresh_from_db()
    assert leased.state == "pending"
    assert browser_for("admin").post(f"/jobs/{job['id']}/snapshots/999999/restore/").status_code == 404
