"""Waiting takes that ask again, through the real ASGI server: parked, not run, until something concerns them.

A worker at the end of a job asks again when its wait runs out. While
nothing happens, the repeat waits on without a take statement (the server's
lease-operation counter does not move; the parked counter does); the first
thing that happens wakes it and it runs. Parked takes still count as seen,
and a revoked token's parked take is refused. One web process, so that every
request and /metrics meet the same process.
"""

import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from tests.support import ROOT, Api, ServerProcess, wait_until

# Seconds between the checks of parked takes' tokens (and the token cache's life).
REFRESH = 1


@pytest.fixture(scope="module")
def server(test_database_url):
    process = ServerProcess(
        test_database_url, workers=1, extra_env={"SHARDLINE_TOKEN_CACHE_SECONDS": str(REFRESH)}
    ).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def revocable_key(django_db_setup, django_db_blocker) -> str:
    """A token of its own, committed before any test's transaction, so that the server sees it."""
    from tests.conftest import make_key

    with django_db_blocker.unblock():
        return make_key(f"parked-{uuid.uuid4().hex[:6]}", "worker")


@pytest.fixture
def api(server, live_keys):
    return Api(server.url, live_keys["worker"])


def counter(api: Api, name: str, labels: str = "") -> float:
    """The sum of a counter's samples whose labels contain ``labels``."""
    total = 0.0
    for line in api.get("/metrics").text.splitlines():
        if line.startswith(name + "{" if labels else name + " ") and labels in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def takes_run(api: Api) -> float:
    return counter(api, "shardline_lease_operations_total", 'op="take"')


def waiting_now(api: Api) -> float:
    """Takes waiting in the server process now (its gauge)."""
    return counter(api, "shardline_waiting_takes")


def parked(api: Api) -> float:
    return counter(api, "shardline_takes_parked_total")


def create(api: Api, works) -> int:
    response = api.post("/api/v1/jobs/", {"name": f"park-{uuid.uuid4().hex[:8]}", "works": works})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def take(api: Api, job_id: int, body: dict):
    return api.post(f"/api/v1/jobs/{job_id}/leases/", body, headers={"Idempotency-Key": uuid.uuid4().hex})


def test_a_repeated_wait_runs_no_take_until_the_job_ends(api):
    job_id = create(api, ["/a"])
    held = take(api, job_id, {"worker": "holder"}).json()["leases"][0]
    before, parked_before = takes_run(api), parked(api)
    for _ in range(4):  # waits of 1 s, each asked again at once, as the SDK does
        answer = take(api, job_id, {"worker": "idle", "wait": 1}).json()
        assert (answer["leases"], answer["exhausted"], answer["retry_after"]) == ([], False, 0.0)
        assert answer["leased_by_others"] == 1 and answer["waiting_on"] == 1
    assert takes_run(api) - before == 1  # the first ran; its end and the three repeats did not
    assert parked(api) - parked_before == 3

    result = {}
    waiting = threading.Thread(
        target=lambda: result.update(take(api, job_id, {"worker": "idle", "wait": 1}).json()), daemon=True
    )
    waiting.start()
    wait_until(lambda: parked(api) - parked_before == 4, 10, 0.01, "the fifth wait to be parked")
    assert api.post(f"/api/v1/leases/{held['id']}/complete/", {"token": held["token"]}).ok
    waiting.join(30)
    assert result["exhausted"]  # woken (the end of its wait would have said to ask again)
    # Answered by the job's end, which came in the completion's commit: no statement.
    assert takes_run(api) - before == 1


def test_the_end_of_a_job_runs_no_take_for_the_takes_waiting_on_its_last_lease(api):
    job_id = create(api, ["/a"])
    held = take(api, job_id, {"worker": "holder"}).json()["leases"][0]
    results = {}

    def wait_for_the_end(worker: str) -> None:
        results[worker] = take(api, job_id, {"worker": worker, "wait": 20}).json()

    waiting = [threading.Thread(target=wait_for_the_end, args=(f"idle-{i}",), daemon=True) for i in range(6)]
    for thread in waiting:
        thread.start()
    wait_until(lambda: waiting_now(api) >= 6, 10, 0.01, "six takes waiting")
    before = takes_run(api)
    assert api.post(f"/api/v1/leases/{held['id']}/complete/", {"token": held["token"]}).ok
    for thread in waiting:
        thread.join(30)
    assert sorted(results) == [f"idle-{i}" for i in range(6)]
    assert all(answer["exhausted"] for answer in results.values())
    # Their leases worth waiting for all ended with the job: none ran to look for the end itself.
    assert takes_run(api) - before == 0


def test_leases_kept_alive_by_heartbeats_cost_a_recheck_not_a_take_per_waiter(api):
    # Leases of 2 s, heartbeated: the expiry a waiting take saw keeps passing
    # while no lease ever expires.
    response = api.post("/api/v1/jobs/", {"name": f"park-{uuid.uuid4().hex[:8]}", "works": ["/a"], "lease_timeout": 2})
    job_id = response.json()["id"]
    held = take(api, job_id, {"worker": "holder"}).json()["leases"][0]
    beating = threading.Event()

    def heartbeat():
        ref = {"id": held["id"], "token": held["token"]}
        while not beating.wait(0.4):
            assert api.post("/api/v1/leases/extend/", {"leases": [ref]}).ok

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        before = takes_run(api)
        began = time.monotonic()
        while time.monotonic() - began < 7:  # past three of the expiries it saw
            answer = take(api, job_id, {"worker": "idle", "wait": 1}).json()
            assert answer["leases"] == [] and not answer["exhausted"]
        assert takes_run(api) - before == 1
    finally:
        beating.set()


def test_a_waiting_take_that_says_leases_started_runs_each_time(api):
    # What it says changes leases (taken ahead, now started: server/sql/take.sql),
    # so an answer parked for the same body must not stand in for it.
    job_id = create(api, ["/a", "/b"])
    own = take(api, job_id, {"worker": "reader"}).json()["leases"][0]
    assert take(api, job_id, {"worker": "holder"}).json()["leases"]
    before, parked_before = takes_run(api), parked(api)
    for _ in range(3):
        answer = take(api, job_id, {"worker": "reader", "wait": 1, "started": [own["id"]]}).json()
        assert answer["leases"] == [] and answer["waiting_on"] == 1
    assert parked(api) == parked_before
    assert takes_run(api) - before >= 3  # each ran (a wait's end may run once more)


def test_a_parked_take_asks_for_what_came_while_it_was_away(api):
    job_id = create(api, ["/a", "/b"])
    held = take(api, job_id, {"worker": "holder", "count": 2}).json()["leases"]
    assert take(api, job_id, {"worker": "idle", "wait": 1}).json()["leases"] == []
    # Between its answer and its repeat, an item came back: the repeat runs and leases it.
    assert api.post(f"/api/v1/leases/{held[0]['id']}/fail/", {"token": held[0]["token"], "error": "boom"}).ok
    parked_before = parked(api)
    answer = take(api, job_id, {"worker": "idle", "wait": 1}).json()
    assert [lease["item"] for lease in answer["leases"]] == [held[0]["item"]]
    assert parked(api) == parked_before


def test_parked_takes_count_as_seen(api):
    job_id = create(api, ["/a"])
    take(api, job_id, {"worker": "holder"})
    take(api, job_id, {"worker": "idle", "wait": 4})

    def last_seen() -> str:
        rows = api.get(f"/api/v1/workers/?job={job_id}").json()
        rows = rows.get("results", rows) if isinstance(rows, dict) else rows
        return next(row["last_seen"] for row in rows if row["name"] == "idle")

    first = last_seen()
    answer = {}
    waiting = threading.Thread(
        target=lambda: answer.update(take(api, job_id, {"worker": "idle", "wait": 4}).json()), daemon=True
    )
    waiting.start()
    wait_until(lambda: last_seen() != first, 3 * REFRESH + 5, 0.1, "the parked take's worker to be seen again")
    waiting.join(10)
    assert answer["leases"] == []


def test_a_parked_take_of_a_revoked_token_is_refused(server, test_database_url, revocable_key):
    key = revocable_key
    # The revoking process starts now and revokes when told: its start-up
    # (seconds on a loaded machine) must not eat into the parked take's wait.
    revoker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, django; django.setup(); sys.stdin.readline()\n"
            "from django.core.management import call_command; call_command('revoke_token', sys.argv[1])",
            key,
        ],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": test_database_url, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    api = Api(server.url, key)
    job_id = create(api, ["/a"])
    take(api, job_id, {"worker": "holder"})
    take(api, job_id, {"worker": "idle", "wait": 5})
    parked_before = parked(api)
    result = {}

    def wait_long():
        began = time.monotonic()
        response = take(api, job_id, {"worker": "idle", "wait": 5})
        result.update(status=response.status_code, seconds=time.monotonic() - began)

    waiting = threading.Thread(target=wait_long, daemon=True)
    waiting.start()
    wait_until(lambda: parked(api) > parked_before, 10, 0.02, "the take to be parked")
    revoker.communicate("revoke\n", timeout=60)
    assert revoker.returncode == 0
    waiting.join(30)
    assert result["status"] == 401 and result["seconds"] < 5  # before its wait would have ended
