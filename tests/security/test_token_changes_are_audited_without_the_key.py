"""Every token an admin creates or revokes through the API is audited, and no audit, log or error holds its key.

The audit is the project's: the ``token_created``/``token_revoked`` log
events (now naming the admin and the token's id) and the admin site's
history of the token (Django's LogEntry, where revocations made in the admin
site are recorded too). Captured: every log record of every logger, every
LogEntry, and every answer but the one that created the key.
"""

import uuid

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from rest_framework.test import APIClient

from server.logging import KeyValueFormatter
from server.models import ApiToken
from server.services import accounts

from ..support import as_text

pytestmark = pytest.mark.django_db


def test_create_and_revoke_are_audited_by_whom_and_without_the_key(captured_logs, django_capture_on_commit_callbacks):
    admin_user, _ = accounts.ensure_user(f"auditor-{uuid.uuid4().hex[:8]}", "admin")
    admin_token, admin_key = accounts.create_token(admin_user, "admin")
    admin = APIClient()
    admin.credentials(HTTP_AUTHORIZATION=f"Token {admin_key}")
    username = f"audited-{uuid.uuid4().hex[:8]}"

    made = admin.post("/api/v1/tokens/", {"user": username, "role": "worker", "jobs": ["ctr-*"]}, format="json")
    assert made.status_code == 201
    key, token_id = made.json()["key"], made.json()["id"]
    answers = []
    used = APIClient()
    used.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    answers.append(used.get("/api/v1/jobs/"))
    answers.append(admin.get("/api/v1/tokens/"))
    answers.append(admin.post(f"/api/v1/tokens/{admin_token.pk}/revoke/", format="json"))  # its own: refused
    with django_capture_on_commit_callbacks(execute=True):
        answers.append(admin.post(f"/api/v1/tokens/{token_id}/revoke/", format="json"))
    answers.append(used.get("/api/v1/jobs/"))  # revoked: 401
    answers.append(admin.post(f"/api/v1/tokens/{token_id}/revoke/", format="json"))  # again: 409
    assert [a.status_code for a in answers] == [200, 200, 409, 200, 401, 409]

    events = [r for r in captured_logs if getattr(r, "event", "") in ("token_created", "token_revoked")]
    mine = [(r.event, r.by, r.user, r.role, r.token_id) for r in events if getattr(r, "token_id", None) == token_id]
    assert mine == [
        ("token_created", admin_user.username, username, "worker", token_id),
        ("token_revoked", admin_user.username, username, "worker", token_id),
    ]
    # Printed as role=, not as a job's state= (server/logging.py's FIELDS).
    created = next(r for r in events if getattr(r, "token_id", None) == token_id)
    assert 'role="worker"' in KeyValueFormatter().format(created)
    entries = LogEntry.objects.filter(object_id=str(token_id), user=admin_user).order_by("action_time", "id")
    assert [e.action_flag for e in entries] == [ADDITION, CHANGE]
    assert "created through the API: role worker, jobs ctr-*" == entries[0].change_message
    assert entries[1].change_message == "revoked through the API"
    assert entries[0].get_admin_url().endswith(f"/apitoken/{token_id}/change/")

    stored = ApiToken.objects.get(pk=token_id)
    texts = [as_text(r) for r in captured_logs]
    texts += [f"{e.object_repr} {e.change_message}" for e in LogEntry.objects.all()]
    texts += [a.content.decode() for a in answers]
    for secret in (key, key[accounts.STORED_PREFIX :], admin_key[accounts.STORED_PREFIX :], stored.key_hash):
        assert not [text for text in texts if secret in text]
