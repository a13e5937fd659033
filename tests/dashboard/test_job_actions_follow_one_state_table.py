"""Every job action is allowed exactly where models.ACTIONS says, through the API, the services and the dashboard."""

import html

import pytest

from server.models import ACTIONS, Item, Job, JobAction, JobState
from tests.api.helpers import create_job, take

pytestmark = pytest.mark.django_db

ENDPOINTS = {
    JobAction.PAUSE: "pause/",
    JobAction.RESUME: "resume/",
    JobAction.CANCEL: "cancel/",
    JobAction.RETRY: "retry-failed/",
}


def failed_item_job(worker_client, name):
    """A job with one failed item and one pending (so that it is running)."""
    job = create_job(worker_client, name, ["/bad", "/good"], shuffle=False, max_attempts=1)
    lease = take(worker_client, job["id"])["leases"][0]
    assert lease["item"] == "/bad"
    worker_client.post(
        f"/api/v1/leases/{lease['id']}/fail/", {"token": lease["token"], "error": "disk error"}, format="json"
    )
    return job


@pytest.mark.parametrize("state", JobState.values)
@pytest.mark.parametrize("action", list(ENDPOINTS))
def test_an_action_is_allowed_exactly_in_the_states_of_the_table(admin_client, worker_client, job_name, state, action):
    job = failed_item_job(worker_client, job_name)
    Job.objects.filter(pk=job["id"]).update(state=state, resume_state=JobState.RUNNING)
    before = sorted(Item.objects.filter(job_id=job["id"]).values_list("id", "state", "attempts"))

    response = admin_client.post(f"/api/v1/jobs/{job['id']}/{ENDPOINTS[action]}")

    if state in ACTIONS[action]:
        assert response.status_code == 200, response.content
        body = response.json()
        shown = body["job"] if action == JobAction.RETRY else body
        assert shown["actions"] == Job.objects.get(pk=job["id"]).actions
    else:
        assert response.status_code == 409, response.content
        assert response.json()["message"] == f"cannot {action} job {job_name!r}: it is {state}"
        # Refused: nothing changed.
        assert Job.objects.get(pk=job["id"]).state == state
        assert sorted(Item.objects.filter(job_id=job["id"]).values_list("id", "state", "attempts")) == before


def test_retrying_a_cancelled_jobs_items_is_refused_and_changes_nothing(
    admin_client, worker_client, browser_for, job_name
):
    job = failed_item_job(worker_client, job_name)
    assert admin_client.post(f"/api/v1/jobs/{job['id']}/cancel/").json()["actions"] == []

    assert admin_client.post(f"/api/v1/jobs/{job['id']}/retry-failed/").status_code == 409
    page = browser_for("admin").post(f"/jobs/{job['id']}/actions/retry/", follow=True).content.decode()
    assert html.escape(f"cannot retry job {job_name!r}: it is cancelled") in page
    assert Item.objects.get(job_id=job["id"], unit_idx=0).state == "failed"


def test_retry_failed_answers_how_many_and_the_job_runs_again(admin_client, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/bad"], max_attempts=1)
    lease = take(worker_client, job["id"])["leases"][0]
    worker_client.post(
        f"/api/v1/leases/{lease['id']}/fail/", {"token": lease["token"], "error": "disk error"}, format="json"
    )
    assert Job.objects.get(pk=job["id"]).state == "done"

    body = admin_client.post(f"/api/v1/jobs/{job['id']}/retry-failed/").json()

    assert body["retried"] == 1 and body["job"]["state"] == "running"
    assert body["job"]["actions"] == ["pause", "cancel", "retry", "restore"]
    assert worker_client.post(f"/api/v1/jobs/{job['id']}/retry-failed/").status_code == 403


def test_the_dashboard_offers_the_actions_of_the_table(admin_client, worker_client, browser_for, job_name):
    job = create_job(worker_client, job_name, ["/a"])
    admin = browser_for("admin")
    page = admin.get(f"/jobs/{job['id']}/").content.decode()
    assert f"/jobs/{job['id']}/actions/pause/" in page and f"/jobs/{job['id']}/actions/resume/" not in page
    admin_client.post(f"/api/v1/jobs/{job['id']}/pause/")
    page = admin.get(f"/jobs/{job['id']}/").content.decode()
    assert f"/jobs/{job['id']}/actions/resume/" in page and f"/jobs/{job['id']}/actions/pause/" not in page
