"""Tokens made for the trust-boundary tests, committed by a process of their own so the real server sees them.

A test's own database work stays in its transaction (invisible to the
server), so the tokens are made the way an admin makes them: by
``manage.py`` against the test database.
"""

import json
import os
import subprocess
import sys
import uuid

from tests.support import ROOT, Api

_MAKE = """
import json, sys
from server.services import accounts
out = []
for role, jobs, username in json.loads(sys.argv[2]):
    user, _ = accounts.ensure_user(username, role)
    out.append(accounts.create_token(user, role, jobs=jobs)[1])
print(json.dumps(out))
"""


def live_tokens(server_url: str, database_url: str, specs: list[tuple]) -> list[Api]:
    """A client of the server per (role, job patterns or None, user name or None: a new user of that role)."""
    rows = [[role, jobs, username or f"{role}-{uuid.uuid4().hex[:8]}"] for role, jobs, username in specs]
    done = subprocess.run(
        [sys.executable, "-c", "import sys, django; django.setup(); exec(sys.argv[1])", _MAKE, json.dumps(rows)],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "LOG_LEVEL": "ERROR",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [Api(server_url, key) for key in json.loads(done.stdout.strip().splitlines()[-1])]


def new_job(api: Api, name: str, works=("/a", "/b", "/c", "/d"), **fields) -> dict:
    response = api.post("/api/v1/jobs/", {"name": name, "works": list(works), "shuffle": False, **fields})
    assert response.status_code in (200, 201), response.text
    return response.json()


def take(api: Api, job_id: int, worker="w1", count=1, headers=None, **fields):
    body = {"worker": worker, "count": count, **fields}
    return api.post(f"/api/v1/jobs/{job_id}/leases/", body, headers=headers or {})
