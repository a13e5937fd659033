"""A body that is not JSON is a 400 on every route, even when Python calls its characters whitespace, or JSON does.

JSON's whitespace is space, tab, CR and LF. Python's ``str.strip()`` also
drops the separators \\x1c-\\x1f, \\x85 and the Unicode spaces: the parser
once read a body of them as an empty object, and a restore posted with the
body ``\\x1c`` rolled a job back (schemathesis found it, ST201).
"""

import pytest

from server.models import Job, Snapshot, SnapshotRestore

from .helpers import create_job

pytestmark = pytest.mark.django_db

NOT_JSON = ["\x1c", "\x1f", "\x0b", "\x0c", "\x85", "\u00a0", "\u2028", "\u3000", " \x1d\n"]


def post_raw(client, path: str, text: str):
    return client.generic("POST", path, text.encode(), content_type="application/json")


@pytest.mark.parametrize("text", NOT_JSON, ids=[f"U+{ord(t[-1] if t[0] == ' ' else t[0]):04X}" for t in NOT_JSON])
def test_a_restore_with_a_body_that_is_not_json_restores_nothing(worker_client, text):
    job = create_job(worker_client, "not-json", works=["/a"])
    snapshot = worker_client.post(f"/api/v1/jobs/{job['id']}/snapshots/", {"worker": "w"}, format="json")
    assert snapshot.status_code == 201, snapshot.content
    response = post_raw(worker_client, f"/api/v1/jobs/{job['id']}/snapshots/{snapshot.json()['id']}/restore/", text)
    assert response.status_code == 400, response.content
    assert "malformed JSON" in response.json()["message"]
    assert not SnapshotRestore.objects.exists()


@pytest.mark.parametrize("text", NOT_JSON[:3])
def test_a_job_or_snapshot_with_a_body_that_is_not_json_is_not_created(worker_client, text):
    assert post_raw(worker_client, "/api/v1/jobs/", text).status_code == 400
    assert not Job.objects.exists()
    job = create_job(worker_client, "not-json-snap", works=["/a"])
    assert post_raw(worker_client, f"/api/v1/jobs/{job['id']}/snapshots/", text).status_code == 400
    assert not Snapshot.objects.exists()


def test_an_empty_body_takes_every_default(worker_client):
    job = create_job(worker_client, "empty-body", works=["/a"])
    # Every field of a snapshot is optional: an empty body takes one.
    response = post_raw(worker_client, f"/api/v1/jobs/{job['id']}/snapshots/", "")
    assert response.status_code == 201, response.content
    assert response.json()["worker"] == ""
    assert Snapshot.objects.filter(job_id=job["id"]).count() == 1


@pytest.mark.parametrize("text", [" ", "\t", "\t\r\n "])
def test_json_whitespace_alone_is_malformed_and_restores_nothing(worker_client, text):
    # No JSON document, and not an empty body: schemathesis posted "\t" to a
    # restore, which was carried out when whitespace read as no body.
    job = create_job(worker_client, "whitespace-body", works=["/a"])
    snapshot = worker_client.post(f"/api/v1/jobs/{job['id']}/snapshots/", {"worker": "w"}, format="json")
    response = post_raw(worker_client, f"/api/v1/jobs/{job['id']}/snapshots/{snapshot.json()['id']}/restore/", text)
    assert response.status_code == 400, response.content
    assert "malformed JSON: the body is whitespace only" in response.json()["message"]
    assert not SnapshotRestore.objects.exists()
