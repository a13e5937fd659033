"""Hostile input to the real server (gunicorn): a clear 4xx with a JSON message, never a 5xx, nothing written.

Extends tests/api/test_job_create_rejects_bad_input_and_writes_nothing.py
(field-by-field validation in-process) with what only a real server shows:
bodies beyond SHARDLINE_MAX_BODY_BYTES, a works list beyond
SHARDLINE_MAX_WORKS, nesting deep enough to exhaust a recursive parser,
non-UTF-8 bytes in the body, query, path and headers, path traversal in
works and prefix (harmless without num_slices; see the data-roots tests for
the policy), and malformed slice URLs.
"""

import json
import uuid

import pytest
import requests

from tests.support import ServerProcess


@pytest.fixture(scope="module")
def small_server(test_database_url, django_db_blocker):
    # Limits small enough to exceed cheaply; everything else as deployed.
    server = ServerProcess(
        test_database_url, workers=1, extra_env={"SHARDLINE_MAX_BODY_BYTES": "65536", "SHARDLINE_MAX_WORKS": "1000"}
    ).start()
    yield server
    server.stop()


@pytest.fixture
def post(small_server, live_keys):
    def send(body: bytes, path="/api/v1/jobs/", content_type="application/json", headers=None):
        headers = {"Authorization": f"Token {live_keys['admin']}", "Content-Type": content_type, **(headers or {})}
        return requests.post(small_server.url + path, data=body, headers=headers, timeout=60)

    return send


def jobs_named(name):
    from server.models import Job

    return Job.objects.filter(name=name).count()


def assert_refused(response, name=None, text=None):
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:500])
    body = response.json()
    assert body["message"], body
    if text:
        assert text in body["message"], body["message"]
    if name:
        assert jobs_named(name) == 0


def test_a_body_beyond_the_limit_is_refused(post):
    name = f"big-{uuid.uuid4().hex[:6]}"
    body = json.dumps({"name": name, "works": ["/x" * 1000] * 100}).encode()
    assert len(body) > 65536
    assert_refused(post(body), name, "larger than 65536 bytes")


def test_a_works_list_beyond_the_limit_is_refused(post):
    name = f"many-{uuid.uuid4().hex[:6]}"
    assert_refused(post(json.dumps({"name": name, "works": ["/a"] * 1001}).encode()), name, "limit of 1000")


@pytest.mark.parametrize("depth", [33, 20000])
def test_deeply_nested_json_is_refused(post, depth):
    name = f"deep-{uuid.uuid4().hex[:6]}"
    body = b'{"name": "' + name.encode() + b'", "works": ["/a"], "seed": ' + b"[" * depth + b"]" * depth + b"}"
    assert_refused(post(body), name)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"name": "NAME", "works": ["/a\xff"]}',
        b'{"name": "NAME\xc3\x28", "works": ["/a"]}',
        b"\xfe\xff\x00{",
        '{"name": "NAME", "works": ["/a"]}'.encode("utf-16"),
    ],
)
def test_non_utf8_bodies_are_refused(post, raw):
    name = f"enc-{uuid.uuid4().hex[:6]}"
    assert_refused(post(raw.replace(b"NAME", name.encode())), name)


def test_non_utf8_in_query_path_and_headers_is_never_a_server_error(small_server, live_keys):
    session = requests.Session()
    base = small_server.url
    answers = [
        session.get(base + "/api/v1/jobs/?state=%ff%fe", headers={"Authorization": f"Token {live_keys['viewer']}"}),
        session.get(base + "/api/v1/jobs/%ff/", headers={"Authorization": f"Token {live_keys['viewer']}"}),
        session.get(
            base + "/api/v1/jobs/1/items/?worker=%c3%28&epoch=%ff",
            headers={"Authorization": f"Token {live_keys['viewer']}"},
        ),
        session.get(base + "/api/v1/jobs/", headers={"Authorization": b"Token \xff\xfe\xfd"}),
        session.get(base + "/api/v1/jobs/", headers={"Authorization": "Token " + "x" * 10000}),
    ]
    for response in answers:
        assert 400 <= response.status_code < 500, (response.request.url, response.status_code, response.text[:300])


@pytest.mark.parametrize(
    "works, message",
    [
        (["/data/a.csv?start=5&end=2"], "0 <= start <= end"),
        (["/data/a.csv?start=x&end=2"], "must be integers"),
        (["/data/a.csv?start=-1&end=2"], "0 <= start <= end"),
        (["/data/a.csv?start=1"], "both start and end"),
    ],
)
def test_malformed_slice_urls_are_refused(post, works, message):
    name = f"slice-{uuid.uuid4().hex[:6]}"
    assert_refused(post(json.dumps({"name": name, "works": works}).encode()), name, message)


def test_a_slice_url_with_num_slices_is_refused(post):
    name = f"slice-{uuid.uuid4().hex[:6]}"
    body = {"name": name, "works": ["/data/a.csv?start=0&end=10"], "num_slices": 2}
    assert_refused(post(json.dumps(body).encode()), name, "already a slice")


def test_well_formed_slice_urls_are_items_like_any_other(post):
    name = f"slice-{uuid.uuid4().hex[:6]}"
    response = post(json.dumps({"name": name, "works": ["/data/a.csv?start=0&end=10"]}).encode())
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("body", [{"works": ["../../etc/passwd"]}, {"works": ["passwd"], "prefix": "/data/../../etc/"}])
def test_path_traversal_without_num_slices_is_only_a_string(post, body):
    # Without num_slices the server never opens a work: items are strings handed
    # to workers, which read them with their own permissions. The data roots
    # policy (tested beside this file) covers the works the server reads.
    name = f"trav-{uuid.uuid4().hex[:6]}"
    response = post(json.dumps({"name": name, **body}).encode())
    assert response.status_code == 201, response.text


def test_deep_nesting_in_a_take_that_may_wait_is_refused(post):
    # The ASGI gateway looks into a waiting take's body (to park it) before Django parses it.
    body = b'{"worker": "w", "wait": 1, "x": ' + b"[" * 20000 + b"]" * 20000 + b"}"
    assert_refused(post(body, path="/api/v1/jobs/1/leases/"))
