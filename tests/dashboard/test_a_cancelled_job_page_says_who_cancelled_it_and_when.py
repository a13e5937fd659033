"""A cancelled job's page says who cancelled it and when, as the SDK's 409 does.

Found: only the SDK's answer said it; the page showed the state alone.
"""

import pytest

from tests.api.helpers import create_job

pytestmark = pytest.mark.django_db


def test_the_page_names_the_admin_and_the_time_of_the_cancel(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"])
    admin = browser_for("admin")
    assert admin.post(f"/jobs/{job['id']}/actions/cancel/").status_code == 302
    who = admin.session["_auth_user_id"]
    from django.contrib.auth import get_user_model

    name = get_user_model().objects.get(pk=who).get_username()
    for page in (f"/jobs/{job['id']}/", f"/jobs/{job['id']}/live/"):
        html = browser_for("viewer").get(page).content.decode()
        assert f"Job &#x27;{job_name}&#x27; was cancelled by {name} at 20" in html, page
        assert " UTC; its unread items will not be handed out." in html
