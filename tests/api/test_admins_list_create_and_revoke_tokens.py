"""An admin lists, creates and revokes API tokens through the API (/api/v1/tokens/).

The key is in the creating answer alone (never listed, never the hash); a
missing user is created with the token's role, an existing one caps it; a
revoked token is refused on its next request; the token a request is made
with is revoked only when the body says ``current: true``.
"""

import uuid

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from server.models import ApiToken
from server.services import accounts

pytestmark = pytest.mark.django_db


def admin_with_token():
    """(client, its token) for a new admin."""
    user, _ = accounts.ensure_user(f"tokens-admin-{uuid.uuid4().hex[:8]}", "admin")
    token, key = accounts.create_token(user, "admin")
    return client_of(key), token


def client_of(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def admin():
    return admin_with_token()[0]


def create(admin, **body):
    return admin.post("/api/v1/tokens/", body, format="json")


def test_the_key_is_in_the_creating_answer_alone(admin):
    username = f"trainer-{uuid.uuid4().hex[:8]}"
    response = create(admin, user=username, role="worker", name="cluster a", jobs=["ctr-*"], expires_in_days=30)
    assert response.status_code == 201, response.content
    assert response["Cache-Control"] == "no-store"
    made = response.json()
    key = made["key"]
    assert key.startswith(accounts.KEY_PREFIX) and made["prefix"] == key[: accounts.STORED_PREFIX]
    assert (made["user"], made["role"], made["jobs"], made["name"]) == (username, "worker", ["ctr-*"], "cluster a")
    assert made["user_created"] and made["state"] == "live" and made["expires_at"] and not made["current"]
    assert accounts.role_of_user(get_user_model().objects.get(username=username)) == "worker"

    worker = client_of(key)
    assert worker.get("/api/v1/jobs/").status_code == 200
    assert worker.post("/api/v1/jobs/", {"name": "other-1", "works": ["/a"]}, format="json").status_code == 403

    listed = admin.get(f"/api/v1/tokens/?user={username}")
    assert listed.status_code == 200
    (row,) = listed.json()["results"]
    assert row["id"] == made["id"] and "key" not in row and row["last_used_at"] is not None
    stored = ApiToken.objects.get(pk=made["id"])
    for secret in (key, key[accounts.STORED_PREFIX :], stored.key_hash):
        assert secret not in listed.content.decode()


def test_an_existing_user_keeps_its_role_and_caps_the_token(admin):
    username = f"reader-{uuid.uuid4().hex[:8]}"
    accounts.ensure_user(username, "viewer")
    response = create(admin, user=username, role="admin")
    assert response.status_code == 409 and "role" in response.json()["fields"], response.content
    assert not ApiToken.objects.filter(user__username=username).exists()
    made = create(admin, user=username, role="viewer").json()
    assert made["user_created"] is False and made["role"] == "viewer"


def test_a_deactivated_user_gets_no_token(admin):
    user, _ = accounts.ensure_user(f"gone-{uuid.uuid4().hex[:8]}", "worker")
    user.is_active = False
    user.save()
    response = create(admin, user=user.username, role="worker")
    assert response.status_code == 409 and "user" in response.json()["fields"]
    assert not ApiToken.objects.filter(user=user).exists()


def test_the_list_filters_by_state_and_user(admin):
    username = f"filtered-{uuid.uuid4().hex[:8]}"
    first = create(admin, user=username, role="viewer").json()
    second = create(admin, user=username, role="viewer").json()
    assert admin.post(f"/api/v1/tokens/{first['id']}/revoke/", format="json").status_code == 200
    ids = lambda query: [row["id"] for row in admin.get(f"/api/v1/tokens/?user={username}&{query}").json()["results"]]  # noqa: E731
    assert ids("") == [second["id"], first["id"]]  # newest first
    assert ids("state=revoked") == [first["id"]] and ids("state=live") == [second["id"]]
    for query, field in (("state=dead", "state"), ("user=a%20b", "user"), ("state=live&state=revoked", "state")):
        response = admin.get(f"/api/v1/tokens/?{query}")
        assert response.status_code == 400 and field in response.json()["fields"], (query, response.content)


def test_a_revoked_token_is_refused_on_its_next_request(admin, django_capture_on_commit_callbacks, settings):
    settings.SHARDLINE_TOKEN_CACHE_SECONDS = 60  # the cache would keep it for a minute: the revocation must not
    made = create(admin, user=f"revoked-{uuid.uuid4().hex[:8]}", role="viewer").json()
    viewer = client_of(made["key"])
    assert viewer.get("/api/v1/jobs/").status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        response = admin.post(f"/api/v1/tokens/{made['id']}/revoke/", format="json")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "revoked" and response.json()["revoked_at"]
    assert viewer.get("/api/v1/jobs/").status_code == 401
    again = admin.post(f"/api/v1/tokens/{made['id']}/revoke/", format="json")
    assert again.status_code == 409 and "already revoked" in again.json()["message"]
    assert admin.post("/api/v1/tokens/987654321/revoke/", format="json").status_code == 404


def test_an_admin_revokes_its_own_token_only_when_it_says_so(django_capture_on_commit_callbacks):
    admin, token = admin_with_token()
    listed = admin.get("/api/v1/tokens/?state=live").json()["results"]
    assert [row["id"] for row in listed if row["current"]] == [token.pk]
    refused = admin.post(f"/api/v1/tokens/{token.pk}/revoke/", {}, format="json")
    assert refused.status_code == 409 and refused.json()["error"] == "token_in_use"
    assert "current: true" in refused.json()["message"]
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    with django_capture_on_commit_callbacks(execute=True):
        done = admin.post(f"/api/v1/tokens/{token.pk}/revoke/", {"current": True}, format="json")
    assert done.status_code == 200 and done.json()["state"] == "revoked"
    assert admin.get("/api/v1/tokens/").status_code == 401


def test_a_signed_in_admin_manages_tokens_without_one(client):
    user = get_user_model().objects.create_user(f"site-admin-{uuid.uuid4().hex[:6]}", password="pw-4711-x")
    accounts.set_role(user, "admin")
    client.force_login(user)
    made = client.post(
        "/api/v1/tokens/", {"user": f"from-site-{uuid.uuid4().hex[:6]}", "role": "viewer"}, "application/json"
    )
    assert made.status_code == 201, made.content
    assert client.post(f"/api/v1/tokens/{made.json()['id']}/revoke/", {}, "application/json").status_code == 200
