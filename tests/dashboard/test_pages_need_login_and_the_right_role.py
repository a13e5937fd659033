import pytest

from server.models import Job
from tests.api.helpers import create_job, take

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(worker_client, job_name):
    return create_job(worker_client, job_name, ["/a", "/b", "/c"])


def pages(job_id, item_id):
    return [
        "/",
        "/jobs/table/",
        "/jobs/new/",
        f"/jobs/{job_id}/",
        f"/jobs/{job_id}/live/",
        f"/jobs/{job_id}/timeline/",
        f"/jobs/{job_id}/audit/",
        f"/jobs/{job_id}/items/{item_id}/",
    ]


def test_every_page_sends_an_anonymous_visitor_to_the_login_page(client, worker_client, job):
    item = take(worker_client, job["id"])["leases"][0]["id"]
    for page in pages(job["id"], item):
        response = client.get(page)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next="), page


def test_a_viewer_sees_jobs_but_no_create_or_action_buttons(browser_for, job):
    viewer = browser_for("viewer")
    home = viewer.get("/").content.decode()
    assert job["name"] in home and "New job" not in home
    detail = viewer.get(f"/jobs/{job['id']}/").content.decode()
    assert "Pause" not in detail and "Cancel</button>" not in detail and "Audit" in detail
    assert viewer.get("/jobs/new/").status_code == 403
    assert viewer.post(f"/jobs/{job['id']}/actions/pause/").status_code == 403
    assert Job.objects.get(pk=job["id"]).state == "ready"


def test_a_worker_may_create_jobs_but_not_pause_them(browser_for, job):
    worker = browser_for("worker")
    assert "New job" in worker.get("/").content.decode()
    assert worker.get("/jobs/new/").status_code == 200
    assert worker.post(f"/jobs/{job['id']}/actions/pause/").status_code == 403


def test_an_admin_pauses_resumes_and_cancels(browser_for, job):
    admin = browser_for("admin")
    detail = admin.get(f"/jobs/{job['id']}/").content.decode()
    assert "Pause" in detail and "data-confirm" in detail
    for action, state in (("pause", "paused"), ("resume", "ready"), ("cancel", "cancelled")):
        response = admin.post(f"/jobs/{job['id']}/actions/{action}/", follow=True)
        assert response.status_code == 200
        assert Job.objects.get(pk=job["id"]).state == state
    response = admin.post(f"/jobs/{job['id']}/actions/pause/", follow=True)
    assert "cannot pause" in response.content.decode()
    assert admin.post(f"/jobs/{job['id']}/actions/explode/").status_code == 404


def test_retry_failed_items_puts_them_back_to_pending(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/bad"], max_attempts=1)
    lease = take(worker_client, job["id"])["leases"][0]
    worker_client.post(
        f"/api/v1/leases/{lease['id']}/fail/", {"token": lease["token"], "error": "disk error"}, format="json"
    )
    assert Job.objects.get(pk=job["id"]).state == "done"
    admin = browser_for("admin")
    response = admin.post(f"/jobs/{job['id']}/actions/retry/", follow=True)
    assert "1 failed item put back to pending" in response.content.decode()
    marks = worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    assert (marks["state"], marks["pending"], marks["failed"]) == ("running", 1, 0)
    assert [lease["item"] for lease in take(worker_client, job["id"])["leases"]] == ["/bad"]


def test_forms_and_actions_need_the_csrf_token(browser_for, job):
    admin = browser_for("admin", enforce_csrf=True)
    assert admin.post(f"/jobs/{job['id']}/actions/pause/").status_code == 403
    assert admin.post("/jobs/new/", {"name": "x", "works": "/a"}).status_code == 403
    assert Job.objects.get(pk=job["id"]).state == "ready"


def test_unknown_jobs_are_a_404(browser_for):
    viewer = browser_for("viewer")
    for page in ("/jobs/987654/", "/jobs/987654/live/", "/jobs/987654/audit/"):
        assert viewer.get(page).status_code == 404
