"""A token revoked through the API stops working at once: in every web process, and for waiting takes.

Each process caches tokens for SHARDLINE_TOKEN_CACHE_SECONDS and answers a
repeated waiting take from its parked answer without running it
(server/parking.py). A revocation is announced to every process
(services/accounts.py, server/waiting.py), which forgets the token when
the notification arrives (milliseconds after the revocation commits):
against gunicorn with several processes, every request is a 401 well within
the cache's seconds; against one process whose cache and parked-take checks
would wait a minute, a parked take and a take that was waiting when the
token was revoked are refused long before their waits end.
"""

import threading
import time
import uuid

import pytest
import requests

from tests.support import Api, ServerProcess, wait_until

CACHE_SECONDS = 60  # far longer than any wait below: only the announcement can explain a prompt 401
WAIT = 10  # seconds a waiting take asks for


def new_token(admin: Api, role: str) -> dict:
    response = admin.post("/api/v1/tokens/", {"user": f"at-once-{uuid.uuid4().hex[:8]}", "role": role})
    assert response.status_code == 201, response.text
    return response.json()


def fresh_get(url: str, key: str) -> int:
    """One request on a new connection (gunicorn hands each connection to one of its processes)."""
    response = requests.get(url + "/api/v1/jobs/?page_size=1", headers={"Authorization": f"Token {key}"}, timeout=30)
    return response.status_code


def test_every_process_refuses_a_revoked_token_at_once(live_server_url, live_keys):
    admin = Api(live_server_url, live_keys["admin"])
    made = new_token(admin, "viewer")
    # Many connections: every process of the server has the token in its cache.
    assert {fresh_get(live_server_url, made["key"]) for _ in range(40)} == {200}
    revoked = admin.post(f"/api/v1/tokens/{made['id']}/revoke/")
    assert revoked.status_code == 200, revoked.text
    began = time.monotonic()
    # The other processes hear of it a moment after the revoking answer: the cache alone would take 10 s.
    wait_until(
        lambda: {fresh_get(live_server_url, made["key"]) for _ in range(8)} == {401},
        3,
        0.05,
        "every process to refuse the revoked token",
    )
    assert time.monotonic() - began < 3
    assert {fresh_get(live_server_url, made["key"]) for _ in range(40)} == {401}


@pytest.fixture(scope="module")
def slow_cache_server(test_database_url):
    server = ServerProcess(
        test_database_url, workers=1, extra_env={"SHARDLINE_TOKEN_CACHE_SECONDS": str(CACHE_SECONDS)}
    ).start()
    yield server
    server.stop()


def take(api: Api, job_id: int, body: dict) -> requests.Response:
    return api.post(f"/api/v1/jobs/{job_id}/leases/", body, headers={"Idempotency-Key": uuid.uuid4().hex})


def held_job(api: Api) -> int:
    """A job whose one item is leased: every other take waits."""
    response = api.post("/api/v1/jobs/", {"name": f"at-once-{uuid.uuid4().hex[:8]}", "works": ["/a"]})
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    assert take(api, job_id, {"worker": "holder"}).json()["leases"]
    return job_id


def metric(api: Api, name: str) -> float:
    lines = api.get("/metrics").text.splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(name + " "))


def parked(api: Api) -> float:
    return metric(api, "shardline_takes_parked_total")


def test_a_parked_take_of_a_revoked_token_is_refused_at_once(slow_cache_server, live_keys):
    admin = Api(slow_cache_server.url, live_keys["admin"])
    made = new_token(admin, "worker")
    worker = Api(slow_cache_server.url, made["key"])
    job_id = held_job(worker)
    asked = {"worker": "idle", "wait": WAIT}
    first = take(worker, job_id, asked)  # waits, then its answer is parked for its repeats
    assert first.status_code == 200 and first.json()["leases"] == []
    before = parked(admin)
    result = {}

    def repeat():
        began = time.monotonic()
        response = take(worker, job_id, asked)
        result.update(status=response.status_code, seconds=time.monotonic() - began)

    waiting = threading.Thread(target=repeat, daemon=True)
    waiting.start()
    wait_until(lambda: parked(admin) > before, 10, 0.02, "the repeat to wait on its parked answer")
    assert admin.post(f"/api/v1/tokens/{made['id']}/revoke/").status_code == 200
    waiting.join(30)
    assert result["status"] == 401 and result["seconds"] < WAIT, result  # woken: not at the end of its wait
    assert take(worker, job_id, asked).status_code == 401


def test_a_take_waiting_when_its_token_is_revoked_is_not_parked_after(slow_cache_server, live_keys):
    admin = Api(slow_cache_server.url, live_keys["admin"])
    made = new_token(admin, "worker")
    worker = Api(slow_cache_server.url, made["key"])
    job_id = held_job(worker)
    asked = {"worker": "idle", "wait": 6}  # the same body (the parking's key) for the take and its repeat
    result = {}
    waiting = threading.Thread(target=lambda: result.update(answer=take(worker, job_id, asked)), daemon=True)
    waiting.start()
    # In its wait (its first: nothing is parked for it yet).
    wait_until(lambda: metric(admin, "shardline_waiting_takes") >= 1, 10, 0.05, "the take to wait")
    assert admin.post(f"/api/v1/tokens/{made['id']}/revoke/").status_code == 200
    waiting.join(30)
    # Its answer was made before the revocation (nothing to lease); its repeat is refused, not parked.
    assert result["answer"].status_code == 200 and result["answer"].json()["leases"] == []
    began = time.monotonic()
    assert take(worker, job_id, asked).status_code == 401
    assert time.monotonic() - began < 5  # a parked repeat would answer 200 after its 6 s
