"""Bad input to token creation and revocation is a 400 naming the field, and writes nothing (no token, no user)."""

import uuid

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from server.models import ApiToken
from server.services import accounts

pytestmark = pytest.mark.django_db

GOOD = {"user": "bad-input-user", "role": "worker"}
CASES = [
    ({"user": ""}, "user"),
    ({"user": "two words"}, "user"),
    ({"user": "x" * 151}, "user"),
    ({"user": "émile"}, "user"),
    ({"user": "a\x00b"}, "user"),
    ({"user": 7}, "user"),
    ({"user": None}, "user"),
    ({"role": "root"}, "role"),
    ({"role": ""}, "role"),
    ({"role": ["worker"]}, "role"),
    ({"name": "x" * 101}, "name"),
    ({"name": "a\x00b"}, "name"),
    ({"jobs": "ctr-*"}, "jobs"),
    ({"jobs": ["ctr *"]}, "jobs"),
    ({"jobs": [""]}, "jobs"),
    ({"jobs": ["x" * 201]}, "jobs"),
    ({"jobs": ["j*"] * 21}, "jobs"),
    ({"jobs": [3]}, "jobs"),
    ({"expires_in_days": 0}, "expires_in_days"),
    ({"expires_in_days": 3651}, "expires_in_days"),
    ({"expires_in_days": "7"}, "expires_in_days"),
    ({"expires_in_days": 1.5}, "expires_in_days"),
    ({"expires_in_days": 2**70}, "expires_in_days"),
    ({"key": "shl_my-own-choice"}, "key"),
    ({"scope": ["ctr-*"]}, "scope"),
]


@pytest.fixture
def admin():
    user, _ = accounts.ensure_user(f"input-admin-{uuid.uuid4().hex[:8]}", "admin")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {accounts.create_token(user, 'admin')[1]}")
    return client


def counts():
    return ApiToken.objects.count(), get_user_model().objects.count(), LogEntry.objects.count()


@pytest.mark.parametrize("change, field", CASES, ids=[f"{f}={str(c)[:30]!r}" for c, f in CASES])
def test_a_bad_field_is_a_400_naming_it(admin, change, field):
    before = counts()
    response = admin.post("/api/v1/tokens/", {**GOOD, **change}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"], response.json()
    assert counts() == before


@pytest.mark.parametrize("missing", ["user", "role"])
def test_a_missing_field_is_a_400_naming_it(admin, missing):
    before = counts()
    body = {key: value for key, value in GOOD.items() if key != missing}
    response = admin.post("/api/v1/tokens/", body, format="json")
    assert response.status_code == 400 and missing in response.json()["fields"]
    assert counts() == before


@pytest.mark.parametrize("body", [b"[]", b'"x"', b"{", b"\x1c"])
def test_a_body_that_is_not_one_object_is_a_400(admin, body):
    before = counts()
    response = admin.generic("POST", "/api/v1/tokens/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert counts() == before


def test_a_new_user_is_not_kept_when_its_token_is_refused(admin):
    before = counts()
    response = admin.post("/api/v1/tokens/", {"user": "never-made", "role": "worker", "jobs": ["x y"]}, format="json")
    assert response.status_code == 400 and counts() == before
    assert not get_user_model().objects.filter(username="never-made").exists()


@pytest.mark.parametrize(
    "body, field", [({"current": "yes"}, "current"), ({"current": 1}, "current"), ({"id": 3}, "id")]
)
def test_a_bad_revocation_is_a_400_and_revokes_nothing(admin, body, field):
    user, _ = accounts.ensure_user(f"kept-{uuid.uuid4().hex[:8]}", "viewer")
    token, _key = accounts.create_token(user, "viewer")
    response = admin.post(f"/api/v1/tokens/{token.pk}/revoke/", body, format="json")
    assert response.status_code == 400 and field in response.json()["fields"], response.content
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None


def test_a_token_id_beyond_a_bigint_is_a_4xx(admin):
    assert admin.post(f"/api/v1/tokens/{2**64}/revoke/", format="json").status_code in (400, 404)
