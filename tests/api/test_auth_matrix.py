"""Every endpoint against every kind of caller: no token, a bad one, and each role."""

import pytest

from server.models import ApiToken, Role

from .helpers import create_job, take

pytestmark = pytest.mark.django_db

# (method, path template, body, minimum role). {job} and {lease} are filled in.
ENDPOINTS = [
    ("get", "/api/v1/jobs/", None, "viewer"),
    ("post", "/api/v1/jobs/", {"name": "matrix-new", "works": ["/x"]}, "worker"),
    ("get", "/api/v1/jobs/{job}/", None, "viewer"),
    ("get", "/api/v1/jobs/{job}/watermarks/", None, "viewer"),
    ("get", "/api/v1/jobs/{job}/items/", None, "viewer"),
    ("get", "/api/v1/jobs/{job}/items/?format=csv", None, "viewer"),
    ("get", "/api/v1/workers/?job={job}", None, "viewer"),
    ("post", "/api/v1/jobs/{job}/leases/", {"worker": "m"}, "worker"),
    ("post", "/api/v1/leases/{lease}/extend/", {"token": "{token}"}, "worker"),
    ("post", "/api/v1/leases/extend/", {"leases": [{"id": "{lease}", "token": "{token}"}]}, "worker"),
    ("post", "/api/v1/leases/{lease}/complete/", {"token": "{token}"}, "worker"),
    ("post", "/api/v1/leases/complete/", {"leases": [{"id": "{lease}", "token": "{token}"}]}, "worker"),
    ("post", "/api/v1/leases/{lease}/fail/", {"token": "{token}", "error": "x"}, "worker"),
    ("post", "/api/v1/jobs/{job}/pause/", None, "admin"),
    ("post", "/api/v1/jobs/{job}/resume/", None, "admin"),
    ("post", "/api/v1/jobs/{job}/cancel/", None, "admin"),
    ("get", "/api/v1/tokens/", None, "admin"),
    ("post", "/api/v1/tokens/", {"user": "matrix-user", "role": "viewer"}, "admin"),
    ("post", "/api/v1/tokens/{victim}/revoke/", None, "admin"),
]
RANK = {"viewer": 0, "worker": 1, "admin": 2}


def fill(value, names):
    if isinstance(value, str):
        if value.startswith("{") and value.endswith("}") and value[1:-1] in names:
            return names[value[1:-1]]
        return value.format(**names)
    if isinstance(value, dict):
        return {k: fill(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, names) for v in value]
    return value


@pytest.fixture
def target(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b", "/c", "/d"])
    lease = take(worker_client, job["id"])["leases"][0]
    victim = ApiToken.objects.exclude(role="admin").first()  # the worker's: revoked by the admin caller
    return {"job": job["id"], "lease": lease["id"], "token": lease["token"], "victim": victim.pk}


@pytest.mark.parametrize("method, path, body, minimum", ENDPOINTS, ids=[f"{e[0]} {e[1]}" for e in ENDPOINTS])
@pytest.mark.parametrize("caller", [None, "bad-token", "revoked", *Role.values])
def test_endpoint_answers_by_role(client_for, target, method, path, body, minimum, caller):
    if caller == "bad-token":
        client = client_for(None)
        client.credentials(HTTP_AUTHORIZATION="Token shl_not-a-real-key")
    elif caller == "revoked":
        client = client_for("admin")
        ApiToken.objects.update(revoked_at="2000-01-01T00:00:00Z")
    else:
        client = client_for(caller)
    response = getattr(client, method)(fill(path, target), fill(body, target), format="json")
    if caller in (None, "bad-token", "revoked"):
        assert response.status_code == 401, response.content
        assert response["WWW-Authenticate"] == "Token"
    elif RANK[caller] < RANK[minimum]:
        assert response.status_code == 403, response.content
        assert minimum in response.json()["message"]
    else:
        assert response.status_code < 400 or response.status_code == 409, response.content


def test_expired_token_is_refused(client_for):
    client = client_for("viewer")
    ApiToken.objects.update(expires_at="2000-01-01T00:00:00Z")
    assert client.get("/api/v1/jobs/").status_code == 401


def test_a_token_is_stored_only_as_a_hash(client_for):
    from server.services.accounts import create_token, ensure_user, hash_key

    user, _ = ensure_user("hash-check", "viewer")
    token, key = create_token(user, "viewer")
    stored = ApiToken.objects.get(pk=token.pk)
    assert key not in (stored.key_hash, stored.prefix) and stored.key_hash == hash_key(key)


def test_a_token_cannot_have_more_power_than_its_user():
    from server.errors import InvalidInput
    from server.services.accounts import create_token, ensure_user

    user, _ = ensure_user("only-viewer", "viewer")
    with pytest.raises(InvalidInput):
        create_token(user, "admin")


def test_a_revoked_token_stops_working_once_its_cache_entry_ages_out(client_for, settings):
    from server.services.accounts import revoke_token

    settings.SHARDLINE_TOKEN_CACHE_SECONDS = 0
    client = client_for("viewer")
    assert client.get("/api/v1/jobs/").status_code == 200
    token = ApiToken.objects.get(role="viewer", revoked_at__isnull=True)
    revoke_token(token.prefix)
    assert client.get("/api/v1/jobs/").status_code == 401
