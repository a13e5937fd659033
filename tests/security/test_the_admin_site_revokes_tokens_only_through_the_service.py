"""The admin site changes a token's state only through the service, as the API does.

Found: the token's change form let an admin edit ``revoked_at`` directly,
which skipped ``accounts.revoke_by_id``: no announcement to the other server
processes (the revocation took up to SHARDLINE_TOKEN_CACHE_SECONDS there), no
audit entry of it, a token could be un-revoked, and deleting a token lost its
history. Now the form edits the label alone, "Revoke selected tokens" calls
the service, and tokens (and, through them, their users) cannot be deleted.
"""

import uuid

import psycopg
import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from server.models import ApiToken
from server.services import accounts
from tests.support import database_url

TOKENS = "/admin/shardline/apitoken/"


@pytest.fixture
def site_admin(client):
    """(the test client logged in to the admin site as a superuser, that user)."""
    user = get_user_model().objects.create_superuser(f"site-admin-{uuid.uuid4().hex[:8]}", "", "pw-for-tests-only")
    client.force_login(user)
    return client, user


def new_token(role: str = "viewer") -> tuple[ApiToken, str]:
    user, _ = accounts.ensure_user(f"admin-site-{uuid.uuid4().hex[:8]}", role)
    return accounts.create_token(user, role, name="before")


def api_status(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/v1/jobs/?page_size=1").status_code


def save_form(client, token: ApiToken, **posted) -> None:
    response = client.post(f"{TOKENS}{token.pk}/change/", {"name": "after", "_save": "Save", **posted})
    assert response.status_code == 302, response.content.decode()[-3000:]


@pytest.mark.django_db
def test_the_change_form_edits_the_label_alone(site_admin):
    client, _ = site_admin
    live, _ = new_token()
    revoked, _ = new_token()
    accounts.revoke_by_id(revoked.pk, None)
    revoked.refresh_from_db()
    page = client.get(f"{TOKENS}{live.pk}/change/").content.decode()
    assert 'name="name"' in page
    for field in ("revoked_at", "expires_at", "key_hash", "created_at", "last_used_at", "role", "jobs", "user"):
        assert f'name="{field}' not in page, field  # no input (a date's are name="revoked_at_0", "..._1")

    # A live token cannot be revoked (nor given an expiry) by the form: only the label changes.
    save_form(
        client,
        live,
        revoked_at_0="2020-01-01",
        revoked_at_1="00:00:00",
        expires_at_0="2020-01-01",
        expires_at_1="00:00:00",
        key_hash="0" * 64,
        role="admin",
    )
    before = (live.revoked_at, live.expires_at, live.key_hash, live.role, live.created_at)
    live.refresh_from_db()
    assert live.name == "after"
    assert (live.revoked_at, live.expires_at, live.key_hash, live.role, live.created_at) == before

    # A revoked token cannot be un-revoked (an empty date) nor have its revocation moved.
    for posted in ({"revoked_at_0": "", "revoked_at_1": ""}, {"revoked_at_0": "2030-01-01", "revoked_at_1": "12:00"}):
        save_form(client, revoked, **posted)
        was = revoked.revoked_at
        revoked.refresh_from_db()
        assert revoked.revoked_at == was is not None


# Committed for real: the revocation is announced (pg_notify) and the cache forgotten when it commits.
@pytest.mark.django_db(transaction=True)
def test_the_revoke_action_announces_audits_and_stops_the_token_at_once(site_admin, settings):
    client, user = site_admin
    settings.SHARDLINE_TOKEN_CACHE_SECONDS = 300  # only the service's announcement can explain a prompt 401
    token, key = new_token("worker")
    other, other_key = new_token("viewer")
    already, _ = new_token()
    accounts.revoke_by_id(already.pk, None)
    assert api_status(key) == 200 and api_status(other_key) == 200  # both now in this process's cache

    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as listener:
        listener.execute(f"LISTEN {accounts.TOKEN_CHANNEL}")
        response = client.post(
            TOKENS, {"action": "revoke_tokens", "_selected_action": [token.pk, already.pk]}, follow=True
        )
        assert response.status_code == 200
        heard = [note.payload for note in listener.notifies(timeout=5, stop_after=1)]
    assert heard == [token.key_hash]  # the key's hash, as stored: never the key

    shown = [str(message) for message in response.context["messages"]]
    assert "Revoked 1 token: it stops working at once, in every server process." in shown
    assert "1 token was already revoked." in shown
    token.refresh_from_db()
    assert token.revoked_at is not None and token.revoked_at <= timezone.now()
    assert api_status(key) == 401
    assert api_status(other_key) == 200  # not selected: untouched
    entry = LogEntry.objects.get(object_id=str(token.pk), user=user)
    assert (entry.action_flag, entry.change_message) == (CHANGE, "revoked in the admin site")
    assert key not in entry.change_message and key not in entry.object_repr


@pytest.mark.django_db
def test_neither_a_token_nor_its_user_can_be_deleted(site_admin):
    client, _ = site_admin
    token, _ = new_token()
    assert client.get(f"{TOKENS}{token.pk}/delete/").status_code == 403
    assert client.post(f"{TOKENS}{token.pk}/delete/", {"post": "yes"}).status_code == 403
    assert 'value="delete_selected"' not in client.get(TOKENS).content.decode()
    client.post(TOKENS, {"action": "delete_selected", "_selected_action": [token.pk], "post": "yes"})
    # Deleting the user would delete its tokens (on_delete=CASCADE): refused for the same reason.
    assert client.post(f"/admin/auth/user/{token.user_id}/delete/", {"post": "yes"}).status_code == 403
    assert ApiToken.objects.filter(pk=token.pk).exists()
    assert get_user_model().objects.filter(pk=token.user_id).exists()
