"""Request bodies are bounded for every caller, on the server `make run` runs (gunicorn + uvicorn, server.asgi).

Proves: a body over its limit is a JSON 413 before it is read (a Content-Length
over the limit is answered without waiting for a byte of the body; a chunked
body without Content-Length is refused as soon as it passes the limit), and
writes nothing; job creation has the large limit (SHARDLINE_MAX_BODY_BYTES),
every other request the small one (SHARDLINE_MAX_REQUEST_BYTES); a chunked
body within its limit is read like any other.
"""

import json
import socket
import time
import uuid
from urllib.parse import urlsplit

import pytest
import requests

from tests.support import ServerProcess

BIG, SMALL = 65536, 4096


@pytest.fixture(scope="module")
def server(test_database_url, django_db_blocker):
    server = ServerProcess(
        test_database_url,
        workers=1,
        extra_env={"SHARDLINE_MAX_BODY_BYTES": str(BIG), "SHARDLINE_MAX_REQUEST_BYTES": str(SMALL)},
    ).start()
    yield server
    server.stop()


@pytest.fixture
def headers(live_keys):
    return {"Authorization": f"Token {live_keys['worker']}", "Content-Type": "application/json"}


def chunked(body: bytes, size: int = 1000):
    # A generator body: requests sends it chunked, without Content-Length.
    return (body[i : i + size] for i in range(0, len(body), size))


def job_body(name: str, size: int) -> bytes:
    works = [f"/data/{i:06d}" for i in range(size // 16)]
    return json.dumps({"name": name, "works": works}).encode()


def jobs_named(name: str) -> int:
    from server.models import Job

    return Job.objects.filter(name=name).count()


def assert_too_large(response, limit: int):
    assert response.status_code == 413, (response.status_code, response.text[:300])
    assert response.json()["error"] == "too_large"
    assert str(limit) in response.json()["message"]


@pytest.mark.parametrize("send", ["whole", "chunked"])
def test_a_job_over_the_large_limit_is_refused_and_written_nowhere(server, headers, send):
    name = f"big-{uuid.uuid4().hex[:6]}"
    body = job_body(name, BIG + 1000)
    assert len(body) > BIG
    data = body if send == "whole" else chunked(body)
    assert_too_large(requests.post(f"{server.url}/api/v1/jobs/", data=data, headers=headers, timeout=30), BIG)
    assert jobs_named(name) == 0


@pytest.mark.parametrize("send", ["whole", "chunked"])
def test_a_job_within_the_large_limit_is_created(server, headers, send):
    name = f"fits-{uuid.uuid4().hex[:6]}"
    body = job_body(name, BIG // 2)
    assert SMALL < len(body) < BIG
    data = body if send == "whole" else chunked(body)
    response = requests.post(f"{server.url}/api/v1/jobs/", data=data, headers=headers, timeout=30)
    assert response.status_code == 201, response.text[:300]
    assert jobs_named(name) == 1


@pytest.mark.parametrize("send", ["whole", "chunked"])
def test_any_other_request_has_the_small_limit(server, headers, send):
    name = f"small-{uuid.uuid4().hex[:6]}"
    job = requests.post(f"{server.url}/api/v1/jobs/", json={"name": name, "works": ["/a"]}, headers=headers, timeout=30)
    url = f"{server.url}/api/v1/jobs/{job.json()['id']}/leases/"
    # A take with a long (refused) field, only to make the body large: refused before it is parsed.
    big = json.dumps({"worker": "w" * (SMALL + 10)}).encode()
    assert_too_large(
        requests.post(url, data=big if send == "whole" else chunked(big), headers=headers, timeout=30), SMALL
    )
    fits = json.dumps({"worker": "w", "count": 1}).encode()
    response = requests.post(url, data=fits if send == "whole" else chunked(fits, 5), headers=headers, timeout=30)
    assert response.status_code == 200, response.text[:300]
    assert len(response.json()["leases"]) == 1


def test_a_large_content_length_is_answered_before_any_body_is_sent(server, live_keys):
    # The client announces a gigabyte and sends nothing: the answer comes at once, not after a read.
    address = urlsplit(server.url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as conn:
        conn.sendall(
            b"POST /api/v1/jobs/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: Token {live_keys['worker']}\r\nContent-Length: {10**9}\r\n\r\n".encode()
        )
        started = time.monotonic()
        answer = conn.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert time.monotonic() - started < 5
