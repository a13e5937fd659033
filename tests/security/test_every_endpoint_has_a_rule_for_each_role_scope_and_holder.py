"""The permission matrix: every route of the URL conf x caller role x token scope x lease holder.

Built from the URL conf, so a new route fails here until it has a rule in
server/api/permissions.PERMISSIONS (API routes) or is one of the few other
kinds of page this test knows (the dashboard, Django's admin, the login
pages, health, metrics and the schema). Each API rule is then exercised:
below its role a 403 (no token: 401), at or above it an answer; a token
scoped elsewhere gets 404 for a job it may not see (403 to create one), and
403 where the rule is for unscoped tokens alone (managing tokens); a worker
user who is not a lease's holder gets 409 with the lease's own token.
"""

import uuid

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from server.api.permissions import PERMISSIONS
from server.models import ROLE_RANK, Role
from server.services import accounts
from tests.api.helpers import create_job, take

pytestmark = pytest.mark.django_db

# Routes outside the API, by the name or namespace they resolve to, and who may open them.
OTHER_ROUTES = {
    "schema": "anyone",
    "swagger-ui": "anyone",
    "healthz": "anyone",
    "favicon": "anyone",
    "metrics": "anyone unless SHARDLINE_METRICS_TOKEN is set",
    "login": "anyone",
    "logout": "a signed-in user",
    "admin": "Django's staff login",
    "dashboard": "a signed-in user of the page's role (tests/dashboard)",
    None: "the admin's login redirect",
}

# A request each API route accepts from a caller allowed to make it ({job},
# {lease}, {token}: filled in from a fresh job and a lease of the holder).
BODIES = {
    "job-list": {"name": "ctr-matrix-{tag}", "works": ["/x"]},
    "job-take": {"worker": "m"},
    "job-resume-leases": {"worker": "m"},
    "job-snapshot": {"worker": "m"},
    "job-snapshot-restore": {"worker": "m"},
    "lease-extend-many": {"leases": [{"id": "{lease}", "token": "{token}"}]},
    "lease-complete": {"token": "{token}"},
    "lease-complete-many": {"leases": [{"id": "{lease}", "token": "{token}"}]},
    "lease-fail": {"token": "{token}", "error": "x"},
    "lease-release": {"token": "{token}", "reason": "x"},
    "lease-extend": {"token": "{token}"},
    "lease-split": {"token": "{token}", "at": 1},
    "token-list": {"user": "matrix-{tag}", "role": "viewer"},
}
QUERIES = {"job-records": "?upto_epoch=0", "worker-list": "?job={job}"}


def routes(resolver=None, prefix=""):
    """(url name or namespace, full pattern) of every route."""
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace in ("admin", "dashboard"):
                yield entry.namespace, prefix + str(entry.pattern)
            else:
                yield from routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield entry.name, prefix + str(entry.pattern)


def test_every_route_has_a_rule():
    api = {name for name, pattern in routes() if pattern.startswith("api/v1/")}
    assert api == set(PERMISSIONS), "API routes without a rule, or rules without a route"
    others = {name for name, pattern in routes() if not pattern.startswith("api/v1/")}
    assert others <= set(OTHER_ROUTES), f"routes no rule covers: {others - set(OTHER_ROUTES)}"


def client(key: str | None) -> APIClient:
    api = APIClient()
    if key:
        api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def key_for(role: str, jobs=None, username=None) -> str:
    user, _ = accounts.ensure_user(username or f"{role}-{uuid.uuid4().hex[:8]}", role)
    return accounts.create_token(user, role, jobs=jobs)[1]


@pytest.fixture
def world():
    """A job named ctr-..., created by a worker who holds a lease of it; a restore-able snapshot; a token to revoke."""
    tag = uuid.uuid4().hex[:8]
    holder_key = key_for("worker", username=f"holder-{tag}")
    holder = client(holder_key)
    job = create_job(holder, f"ctr-{tag}", [f"/p{i}?start=0&end=100" for i in range(8)])
    lease = take(holder, job["id"])["leases"][0]
    snapshot = holder.post(f"/api/v1/jobs/{job['id']}/snapshots/", {"worker": "h"}, format="json").json()
    victim, _ = accounts.ensure_user(f"victim-{tag}", "viewer")
    revocable = accounts.create_token(victim, "viewer")[0]
    return {"tag": tag, "job": job, "lease": lease, "snapshot": snapshot, "holder": holder, "revocable": revocable.pk}


def request(api: APIClient, name: str, method: str, world: dict):
    lease = world["lease"]
    names = {"job": world["job"]["id"], "lease": lease["id"], "token": lease["token"], "tag": world["tag"]}
    kwargs = {
        "job_id": names["job"],
        "lease_id": names["lease"],
        "item_id": names["lease"],
        "snapshot_id": world["snapshot"]["id"],
        "token_id": world["revocable"],
    }
    wanted = {k: v for k, v in kwargs.items() if k in _params(get_resolver(), name)}
    path = reverse(name, kwargs=wanted) + QUERIES.get(name, "").format(**names)
    body = _fill(BODIES.get(name), names)
    return getattr(api, method.lower())(path, body, format="json")


def _params(resolver, name):
    for possibility, _pattern, _defaults, _converters in resolver.reverse_dict.getlist(name):
        return set(possibility[0][1])
    return set()


def _fill(value, names):
    if isinstance(value, str):
        inner = value[1:-1]
        return (
            names[inner] if value.startswith("{") and value.endswith("}") and inner in names else value.format(**names)
        )
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    return value


CASES = [(name, method) for name, methods in PERMISSIONS.items() for method in methods]


@pytest.mark.parametrize("name, method", CASES, ids=[f"{m} {n}" for n, m in CASES])
def test_each_role_gets_what_its_rule_says(world, name, method):
    required, check = PERMISSIONS[name][method]
    assert request(client(None), name, method, world).status_code == 401
    for role in Role.values:
        response = request(client(key_for(role)), name, method, world)
        if ROLE_RANK[Role(role)] < ROLE_RANK[required]:
            assert response.status_code == 403, (role, response.content)
        elif check == "restore" and role != "admin":
            # Not the job's creator, nor scoped to it: see the restore test.
            assert response.status_code == 403, (role, response.content)
        else:
            assert response.status_code < 500 and response.status_code not in (401, 403), (role, response.content)


@pytest.mark.parametrize("name, method", CASES, ids=[f"{m} {n}" for n, m in CASES])
def test_a_token_scoped_elsewhere_reaches_nothing_of_the_job(world, name, method):
    required, check = PERMISSIONS[name][method]
    outsider = client(key_for(required.value if required != Role.VIEWER else "viewer", jobs=["elsewhere-*"]))
    response = request(outsider, name, method, world)
    job = world["job"]
    if check in ("scope", "restore"):
        assert response.status_code == 404, response.content
    elif check == "create":
        assert response.status_code == 403 and "elsewhere-*" in response.json()["message"]
    elif check == "listed":
        assert response.status_code in (200, 404)
        assert job["name"] not in response.content.decode()
        assert f'"job":{job["id"]}' not in response.content.decode().replace(" ", "")
    elif check == "holder":
        body = response.json()
        assert response.status_code == 409 or body.get("lost") == [world["lease"]["id"]], response.content
    elif check == "unscoped":
        assert response.status_code == 403 and "elsewhere-*" in response.json()["message"], response.content
    else:
        pytest.fail(f"unknown check {check!r}")


@pytest.mark.parametrize("name", [n for n, methods in PERMISSIONS.items() if "holder" in str(methods.values())])
def test_only_the_holder_of_a_lease_may_act_on_it(world, name):
    stranger = client(key_for("worker"))  # unscoped: sees the job, holds nothing
    response = request(stranger, name, "POST", world)
    body = response.json()
    assert response.status_code == 409 or body.get("lost") == [world["lease"]["id"]], response.content
    # The holder itself is answered (the lease is still its own).
    mine = request(world["holder"], name, "POST", world)
    assert mine.status_code == 200, mine.content
