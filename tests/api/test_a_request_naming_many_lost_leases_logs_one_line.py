"""A request naming many leases its caller no longer holds: one warning with their count, not one per lease.

A take, a batch of completions and a heartbeat each name up to
SHARDLINE_MAX_TAKE leases; with a line per lost lease one request of a
worker token wrote a thousand warnings (seen in schemathesis' runs).
"""

import logging

import pytest

from server.services.lost import LOGGED_IDS

from .helpers import create_job, take

pytestmark = pytest.mark.django_db

LOST = 50


def refs(first: int):
    # Ids no lease of the test has, with tokens: each is refused as lost.
    return [{"id": first + n, "token": 7} for n in range(LOST)]


def lost_lines(caplog):
    return [r for r in caplog.records if r.name == "shardline.leases" and getattr(r, "event", None) == "lease_lost"]


@pytest.mark.parametrize("how", ["take", "batch", "heartbeat"])
def test_many_lost_leases_in_one_request_log_one_line(worker_client, job_name, caplog, how):
    job = create_job(worker_client, job_name, ["/a"])
    held = take(worker_client, job["id"])["leases"][0]
    bogus = refs(held["id"] + 1_000_000)
    with caplog.at_level(logging.WARNING, logger="shardline.leases"):
        if how == "take":
            answer = worker_client.post(
                f"/api/v1/jobs/{job['id']}/leases/", {"worker": "w1", "complete": bogus}, format="json"
            )
            assert sorted(answer.json()["lost"]) == [ref["id"] for ref in bogus]
        elif how == "batch":
            answer = worker_client.post("/api/v1/leases/complete/", {"leases": bogus}, format="json")
            assert len(answer.json()["lost"]) == LOST
        else:
            mine = {"id": held["id"], "token": held["token"]}
            answer = worker_client.post("/api/v1/leases/extend/", {"leases": [mine, *bogus]}, format="json")
            assert len(answer.json()["lost"]) == LOST
    assert answer.status_code == 200, answer.content
    (line,) = lost_lines(caplog)
    assert line.count == LOST and len(line.items) == LOGGED_IDS
    assert set(line.items) <= {ref["id"] for ref in bogus}


def test_one_lost_lease_is_logged_with_its_id(worker_client, job_name, caplog):
    job = create_job(worker_client, job_name, ["/a"])
    held = take(worker_client, job["id"])["leases"][0]
    with caplog.at_level(logging.WARNING, logger="shardline.leases"):
        answer = worker_client.post(f"/api/v1/leases/{held['id']}/complete/", {"token": 7}, format="json")
    assert answer.status_code == 409
    (line,) = lost_lines(caplog)
    assert (line.item, line.count, line.reason, hasattr(line, "items")) == (held["id"], 1, "complete", False)
    assert "token" not in line.getMessage()
