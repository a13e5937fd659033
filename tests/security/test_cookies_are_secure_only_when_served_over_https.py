"""Cookie flags follow SHARDLINE_HTTPS, never DEBUG; the session cookie is HttpOnly, both are SameSite=Lax.

Settings are read once per process, so each case loads them in a fresh interpreter.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT

PROBE = (
    "import json, server.settings as s; print(json.dumps({k: getattr(s, k) for k in ("
    "'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SESSION_COOKIE_HTTPONLY', 'SESSION_COOKIE_SAMESITE',"
    "'CSRF_COOKIE_SAMESITE', 'DEBUG')}))"
)


def load_settings(tmp_path, **env):
    base = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SHARDLINE_HTTPS", "SECRET_KEY")}
    base.update({"SHARDLINE_HOME": str(tmp_path), "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", **env})
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=base, capture_output=True, text=True, timeout=60
    )
    return result


@pytest.mark.parametrize(
    "env, secure",
    [
        ({"SECRET_KEY": "k" * 50}, False),
        ({"SECRET_KEY": "k" * 50, "SHARDLINE_HTTPS": "1"}, True),
        ({"SECRET_KEY": "k" * 50, "DEBUG": "1"}, False),
        ({"SECRET_KEY": "k" * 50, "DEBUG": "1", "SHARDLINE_HTTPS": "1"}, True),
    ],
)
def test_cookie_flags(tmp_path, env, secure):
    result = load_settings(tmp_path, **env)
    assert result.returncode == 0, result.stderr
    flags = json.loads(result.stdout.strip().splitlines()[-1])
    assert flags["SESSION_COOKIE_SECURE"] is secure and flags["CSRF_COOKIE_SECURE"] is secure
    assert flags["SESSION_COOKIE_HTTPONLY"] is True
    assert flags["SESSION_COOKIE_SAMESITE"] == "Lax" and flags["CSRF_COOKIE_SAMESITE"] == "Lax"
