"""A JSON string or field name holding an unpaired UTF-16 surrogate ("\\ud800") is valid JSON, but not text.

No database or encoder can store one: it was a 500 wherever it reached one
(a work, a worker name, a field name). The JSON parser refuses it, for every
endpoint, naming where it is.
"""

import json

import pytest

from server.models import Job, Snapshot, Worker

from .helpers import create_job

pytestmark = pytest.mark.django_db


def post_raw(client, path: str, text: str):
    # json.dumps keeps lone surrogates as \\uXXXX escapes: the bytes are valid UTF-8.
    return client.generic("POST", path, text.encode(), content_type="application/json")


def assert_refused(response, where: str):
    assert response.status_code == 400, response.content
    body = response.json()
    assert "surrogate" in body["message"] and where in body["message"], body


def test_a_lone_surrogate_in_a_work_creates_no_job(worker_client):
    text = json.dumps({"name": "surrogate", "works": ["/a", "\ud800"]})
    assert_refused(post_raw(worker_client, "/api/v1/jobs/", text), "works[1]")
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    "body, where",
    [
        ({"worker": "\ud800"}, "worker"),
        ({"worker": "w", "consumer": "c\udc00"}, "consumer"),
        ({"worker": "w", "\ud800": 1}, "field name"),
        ({"worker": "w", "complete": [{"id": 1, "token": 1, "x\udfff": 0}]}, "complete[0]"),
    ],
)
def test_a_lone_surrogate_in_a_take_leases_nothing(worker_client, body, where):
    job = create_job(worker_client, "take-surrogate", works=["/a"])
    assert_refused(post_raw(worker_client, f"/api/v1/jobs/{job['id']}/leases/", json.dumps(body)), where)
    assert not Worker.objects.exists()
    assert Job.objects.get(id=job["id"]).units_count == 1


def test_a_lone_surrogate_in_a_snapshot_takes_none(worker_client):
    job = create_job(worker_client, "snap-surrogate", works=["/a"])
    assert_refused(post_raw(worker_client, f"/api/v1/jobs/{job['id']}/snapshots/", '{"worker": "\\udbff"}'), "worker")
    assert not Snapshot.objects.exists()


def test_a_surrogate_pair_is_text(worker_client):
    # "\ud83d\ude00" is one character (U+1F600), written as a pair of escapes: text like any other.
    response = post_raw(worker_client, "/api/v1/jobs/", json.dumps({"name": "pair", "works": ["/a\U0001f600"]}))
    assert response.status_code == 201, response.content
    assert Job.objects.get(name="pair").works_count == 1
