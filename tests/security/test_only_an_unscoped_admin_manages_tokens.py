"""What a worker or viewer token, a token limited to jobs, or a signed-in worker can do with the token routes: nothing.

A worker token lives on every training node, so it is the one most likely
to leak. Through /api/v1/tokens/ it must not learn that a token exists, make
one (for anyone, itself included, at any role), make a user, nor revoke a
token (another's or its own). The same for a viewer, and for an admin token
limited to jobs: were it allowed, it could make itself an unscoped admin token.
Each refusal is a 403 that writes nothing.
"""

import uuid

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from server.models import ApiToken
from server.services import accounts

pytestmark = pytest.mark.django_db


def holder(role: str, jobs=None):
    """(client, its user, its token) for a new user of ``role``."""
    user, _ = accounts.ensure_user(f"{role}-{uuid.uuid4().hex[:8]}", role)
    token, key = accounts.create_token(user, role, jobs=jobs)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client, user, token


@pytest.fixture
def bystander():
    """Someone else's live admin token, with a name a listing would show."""
    user, _ = accounts.ensure_user(f"bystander-{uuid.uuid4().hex[:8]}", "admin")
    return accounts.create_token(user, "admin", name="the-bystanders-token")[0]


def state():
    return (
        list(ApiToken.objects.order_by("id").values_list("id", "revoked_at")),
        get_user_model().objects.count(),
        LogEntry.objects.count(),
    )


CALLERS = {
    "worker": lambda: holder("worker"),
    "viewer": lambda: holder("viewer"),
    "worker scoped to its jobs": lambda: holder("worker", ["ctr-*"]),
    "admin scoped to jobs": lambda: holder("admin", ["ctr-*"]),
}


@pytest.mark.parametrize("caller", sorted(CALLERS))
def test_every_token_route_refuses_it_and_writes_nothing(caller, bystander):
    client, user, token = CALLERS[caller]()
    before = state()
    attempts = {
        "list": client.get("/api/v1/tokens/"),
        "list one user's": client.get(f"/api/v1/tokens/?user={bystander.user.username}"),
        "create for itself, as admin": client.post(
            "/api/v1/tokens/", {"user": user.username, "role": "admin"}, format="json"
        ),
        "create for itself, same role": client.post(
            "/api/v1/tokens/", {"user": user.username, "role": token.role}, format="json"
        ),
        "create for a new user": client.post(
            "/api/v1/tokens/", {"user": "made-by-a-leak", "role": "worker"}, format="json"
        ),
        "create unscoped": client.post(
            "/api/v1/tokens/", {"user": user.username, "role": token.role, "jobs": []}, format="json"
        ),
        "revoke another's": client.post(f"/api/v1/tokens/{bystander.pk}/revoke/", {"current": True}, format="json"),
        "revoke its own": client.post(f"/api/v1/tokens/{token.pk}/revoke/", {"current": True}, format="json"),
        "revoke one that does not exist": client.post("/api/v1/tokens/987654321/revoke/", format="json"),
    }
    for what, response in attempts.items():
        assert response.status_code == 403, (what, response.status_code, response.content)
        text = response.content.decode()
        assert bystander.prefix not in text and "the-bystanders-token" not in text, what
    expected = "limited to ctr-*" if caller == "admin scoped to jobs" else "needs the admin role"
    assert all(expected in response.json()["message"] for response in attempts.values())
    assert state() == before
    assert not get_user_model().objects.filter(username="made-by-a-leak").exists()
    # Nothing it tried changed what it is: the same role, the same scope, still live.
    assert client.get("/api/v1/jobs/").status_code == 200


def test_a_scoped_admin_token_is_told_why(bystander):
    client, _user, _token = holder("admin", ["ctr-*"])
    response = client.get("/api/v1/tokens/")
    assert response.status_code == 403
    assert response.json()["message"] == (
        "this action needs a token that is not limited to jobs; this one is limited to ctr-*"
    )


def test_a_signed_in_worker_is_refused_too(bystander):
    user = get_user_model().objects.create_user(f"site-worker-{uuid.uuid4().hex[:6]}", password="pw-4711-x")
    accounts.set_role(user, "worker")
    browser = Client()
    browser.force_login(user)
    before = state()
    assert browser.get("/api/v1/tokens/").status_code == 403
    made = browser.post("/api/v1/tokens/", {"user": user.username, "role": "worker"}, "application/json")
    assert made.status_code == 403
    assert browser.post(f"/api/v1/tokens/{bystander.pk}/revoke/", {}, "application/json").status_code == 403
    assert state() == before


def test_without_a_token_every_route_is_a_401(bystander):
    anonymous = APIClient()
    before = state()
    assert anonymous.get("/api/v1/tokens/").status_code == 401
    assert anonymous.post("/api/v1/tokens/", {"user": "x", "role": "admin"}, format="json").status_code == 401
    assert anonymous.post(f"/api/v1/tokens/{bystander.pk}/revoke/", format="json").status_code == 401
    assert state() == before
