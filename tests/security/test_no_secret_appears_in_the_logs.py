"""Token keys and passwords never reach the logs.

Captures every log record (every logger, DEBUG and up, with its extra fields)
while a token is created (service and management command), used, refused,
revoked, and while a user logs in with a right and a wrong password; neither
the key nor the passwords appear in any message, argument or field.
"""

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from server.models import Role
from server.services import accounts

from ..support import as_text

pytestmark = pytest.mark.django_db

PASSWORD = "a-very-private-password-4711"
WRONG = "another-private-guess-0815"


def test_no_secret_appears_in_the_logs(captured_logs, capsys, settings):
    settings.SHARDLINE_LOGIN_MAX_FAILURES = 100
    user = get_user_model().objects.create_user(f"secret-{uuid.uuid4().hex[:6]}", password=PASSWORD)
    accounts.set_role(user, Role.ADMIN)
    _token, key = accounts.create_token(user, Role.WORKER, name="cluster")
    call_command("create_token", user.username, "--role", "viewer")
    command_key = capsys.readouterr().out.strip().split()[-1]
    assert command_key.startswith(accounts.KEY_PREFIX)

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/jobs/").status_code == 200
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}x")
    assert api.get("/api/v1/jobs/").status_code == 401
    accounts.revoke_token(key[:10])
    accounts._cache.clear()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/jobs/").status_code == 401

    assert Client().post("/accounts/login/", {"username": user.username, "password": WRONG}).status_code == 200
    assert Client().post("/accounts/login/", {"username": user.username, "password": PASSWORD}).status_code == 302

    text = "\n".join(as_text(record) for record in captured_logs)
    assert "token_created" in text, "the capture saw nothing"
    for secret in (key, key[10:], command_key, command_key[10:], PASSWORD, WRONG):
        assert secret not in text
