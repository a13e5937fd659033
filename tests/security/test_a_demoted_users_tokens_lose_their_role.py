"""A token's role is at most its user's current role: demoting a user takes its tokens down within the token cache period.

Against a real server whose token cache lasts one second: an admin token
pauses a job; its user becomes a viewer; the same token is refused the next
pause once the cache has refreshed, and still reads.
"""

import os
import subprocess
import sys
import time
import uuid

import pytest

from tests.support import ROOT, ServerProcess, wait_until

from .trust import live_tokens, new_job


@pytest.fixture(scope="module")
def quick_server(test_database_url):
    server = ServerProcess(test_database_url, workers=1, extra_env={"SHARDLINE_TOKEN_CACHE_SECONDS": "1"}).start()
    yield server
    server.stop()


def set_role(database_url: str, username: str, role: str) -> None:
    script = (
        "import sys, django; django.setup()\n"
        "from django.contrib.auth import get_user_model\n"
        "from server.services import accounts\n"
        "accounts.set_role(get_user_model().objects.get(username=sys.argv[1]), sys.argv[2])\n"
    )
    env = {"DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "tests.settings", "LOG_LEVEL": "ERROR"}
    subprocess.run(
        [sys.executable, "-c", script, username, role],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        timeout=60,
    )


def test_an_admin_token_of_a_demoted_user_cannot_pause_a_job(quick_server, test_database_url):
    username = f"admin-{uuid.uuid4().hex[:8]}"
    (admin,) = live_tokens(quick_server.url, test_database_url, [("admin", None, username)])
    job = new_job(admin, f"demote-{uuid.uuid4().hex[:8]}")
    assert admin.post(f"/api/v1/jobs/{job['id']}/pause/").status_code == 200
    assert admin.post(f"/api/v1/jobs/{job['id']}/resume/").status_code == 200

    set_role(test_database_url, username, "viewer")
    demoted_at = time.monotonic()
    # Polled with an admin action that changes nothing here (no failed items to retry).
    wait_until(
        lambda: admin.post(f"/api/v1/jobs/{job['id']}/retry-failed/").status_code == 403,
        timeout=10,
        message="the demoted user's admin token to be refused",
    )
    assert time.monotonic() - demoted_at < 5  # the cache period is 1 s
    assert admin.post(f"/api/v1/jobs/{job['id']}/pause/").status_code == 403
    after = admin.get(f"/api/v1/jobs/{job['id']}/")
    assert after.status_code == 200 and after.json()["state"] != "paused"  # a viewer still reads
