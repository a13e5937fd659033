"""Long-polling through the real ASGI server: a take that waits is answered when work comes, not when its wait ends.

Each waiting take asks for 20 seconds and the test checks that it returned
well before that: woken by the database's notification (a failed item back
to pending, a split's remainder, the job's end, its cancellation), not by the
end of its wait. A client that goes away while it waits leaves no waiter in
the server process.
"""

import socket
import threading
import time
import uuid

import psycopg
import pytest

from tests.support import Api, ServerProcess, wait_until

WAIT = 20


class Waiting(threading.Thread):
    """One take with ``wait``, in the background: ``.answer``, ``.status``, ``.seconds``."""

    def __init__(self, api: Api, job_id: int, worker: str, consumer: str | None = None):
        super().__init__(daemon=True)
        self.api, self.job_id, self.worker, self.consumer = api, job_id, worker, consumer or worker
        self.answer = self.status = self.seconds = None

    def run(self):
        began = time.monotonic()
        response = self.api.post(
            f"/api/v1/jobs/{self.job_id}/leases/",
            {"worker": self.worker, "consumer": self.consumer, "wait": WAIT},
            headers={"Idempotency-Key": uuid.uuid4().hex},
        )
        self.seconds = time.monotonic() - began
        self.status, self.answer = response.status_code, response.json()

    def result(self):
        self.join(WAIT + 10)
        assert not self.is_alive(), "the waiting take never returned"
        return self


def create(api: Api, works, **fields) -> int:
    response = api.post("/api/v1/jobs/", {"name": f"wait-{uuid.uuid4().hex[:8]}", "works": works, **fields})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def take(api: Api, job_id: int, worker: str) -> dict:
    response = api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": worker})
    assert response.status_code == 200, response.text
    return response.json()


def waiting_takes(api: Api) -> float:
    for line in api.get("/metrics").text.splitlines():
        if line.startswith("shardline_waiting_takes "):
            return float(line.split()[1])
    raise AssertionError("/metrics has no shardline_waiting_takes")


def started_waiting(api: Api, job_id: int, worker: str, consumer: str | None = None) -> Waiting:
    waiting = Waiting(api, job_id, worker, consumer)
    waiting.start()
    # Its take has run and found nothing: the server marked it waiting.
    wait_until(lambda: worker_waits(api, job_id, worker), 10, 0.02, "the take to be waiting")
    return waiting


def worker_rows(api: Api, job_id: int) -> list[dict]:
    rows = api.get(f"/api/v1/workers/?job={job_id}").json()
    return rows.get("results", rows) if isinstance(rows, dict) else rows


def worker_waits(api: Api, job_id: int, worker: str) -> bool:
    return any(row["name"] == worker and row.get("waiting_since") for row in worker_rows(api, job_id))


def last_seen(api: Api, job_id: int, worker: str) -> str:
    """When the server last saw ``worker`` (its takes and heartbeats mark it)."""
    (seen,) = [row["last_seen"] for row in worker_rows(api, job_id) if row["name"] == worker]
    return seen


@pytest.fixture
def api(live_api):
    return live_api("worker")


def test_a_failed_item_wakes_a_waiting_take_and_it_leases_it(api):
    job_id = create(api, ["/a"])
    held = take(api, job_id, "holder")["leases"][0]
    waiting = started_waiting(api, job_id, "idle")
    assert api.post(f"/api/v1/leases/{held['id']}/fail/", {"token": held["token"], "error": "boom"}).ok
    result = waiting.result()
    # Its wake may race the fail (the test below holds that race open).
    assert result.status == 200 and [lease["item"] for lease in result.answer["leases"]] == ["/a"], (
        result.status,
        result.seconds,
        result.answer,
    )
    assert result.seconds < WAIT / 2


def test_a_waiting_take_that_finds_pending_items_held_by_another_transaction_waits_for_them(api, test_database_url):
    # What a take meets when it runs just as an item comes back: its
    # statement's snapshot, or another taker's lock, hides the pending row
    # that at_end.sql then sees. Its client asked to wait, so the server
    # takes again shortly instead of answering "nothing, retry in 50 ms"
    # (which a woken take once answered in CI, its wake racing a fail).
    job_id = create(api, ["/a"])
    with psycopg.connect(test_database_url) as holding:
        (item,) = holding.execute(
            "SELECT id FROM shardline_item WHERE job_id = %s AND state = 'pending' FOR UPDATE", [job_id]
        ).fetchone()
        waiting = started_waiting(api, job_id, "idle")
    # The lock went with the transaction's end.
    result = waiting.result()
    assert result.status == 200 and [lease["id"] for lease in result.answer["leases"]] == [item], result.answer
    assert result.seconds < WAIT / 2


def test_a_waiting_take_at_an_epoch_another_is_creating_waits_and_leases_from_it(api, test_database_url):
    job_id = create(api, ["/a"], num_epochs=2)
    held = take(api, job_id, "first")["leases"][0]
    assert api.post(f"/api/v1/leases/{held['id']}/complete/", {"token": held["token"]}).ok
    with psycopg.connect(test_database_url) as creating:
        # As a taker that is inserting epoch 1: it holds the job row.
        creating.execute("SELECT id FROM shardline_job WHERE id = %s FOR NO KEY UPDATE", [job_id])
        waiting = started_waiting(api, job_id, "idle")
    result = waiting.result()
    assert result.status == 200 and [(lease["item"], lease["epoch"]) for lease in result.answer["leases"]] == [
        ("/a", 1)
    ], result.answer
    assert result.seconds < WAIT / 2


def test_a_take_ahead_that_may_not_lease_the_pending_piece_is_not_held(api):
    # A take ahead leases no piece split off a range: the pending piece is
    # not its to wait for, and holding it would run its statement again
    # every moment of its wait.
    job_id = create(api, ["/a", "/f.csv?start=0&end=1000"], shuffle=False)
    # Its worker's pace is known (an item done): near the end, a take ahead
    # of a worker of unknown pace is deferred before it looks for items.
    first = take(api, job_id, "reading")["leases"][0]
    assert first["item"] == "/a"
    assert api.post(f"/api/v1/leases/{first['id']}/complete/", {"token": first["token"]}).ok
    held = take(api, job_id, "holder")["leases"][0]
    cut = api.post(f"/api/v1/leases/{held['id']}/split/", {"token": held["token"], "at": 500})
    assert cut.ok, cut.text
    began = time.monotonic()
    response = api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "reading", "ahead": True, "wait": WAIT})
    answer = response.json()
    # Pending items it may not lease: told to ask again, not held.
    assert response.status_code == 200 and answer["leases"] == [] and answer["retry_after"] == 0.05, answer
    assert time.monotonic() - began < WAIT / 2


def test_a_waiting_take_from_a_later_epoch_makes_one_epoch_per_request(api):
    # Each take that leases nothing makes one epoch at most that is not its
    # own: held and run again, one request would make the job's epochs one
    # after another.
    job_id = create(api, ["/a"], num_epochs=6)
    began = time.monotonic()
    body = {"worker": "later", "from_epoch": 5, "wait": WAIT}
    response = api.post(f"/api/v1/jobs/{job_id}/leases/", body)
    assert response.status_code == 200 and response.json()["leases"] == [], response.text
    assert time.monotonic() - began < WAIT / 2
    assert api.get(f"/api/v1/jobs/{job_id}/").json()["epochs_materialised"] == 2


def test_a_split_wakes_the_holders_heartbeat_and_then_the_waiting_take(api):
    job_id = create(api, ["/f.csv?start=0&end=1000"])
    held = take(api, job_id, "holder")["leases"][0]
    # A holder that reports its position: none read yet, so no pace to
    # extrapolate (the server would judge a holder that read 10 records in
    # the first milliseconds nearly done, and ask nothing of it).
    ref = {"id": held["id"], "token": held["token"], "position": 0}
    assert api.post("/api/v1/leases/extend/", {"leases": [ref]}).ok

    heartbeat = {}

    def beat():
        # As the SDK's heartbeat thread: the server holds each beat (in a
        # job's tail, a quarter of a second: the pace it wants positions at),
        # and the next leaves as one returns, until a split is asked.
        began = time.monotonic()
        while time.monotonic() - began < WAIT:
            answer = api.post("/api/v1/leases/extend/", {"leases": [ref], "wait": WAIT}).json()
            if answer["splits"]:
                break
        heartbeat["answer"] = answer
        heartbeat["seconds"] = time.monotonic() - began

    seen = last_seen(api, job_id, "holder")
    beating = threading.Thread(target=beat, daemon=True)
    beating.start()
    # The heartbeat has run (it marked its holder seen) and found no split
    # asked: the server holds it, and a split asked from now on wakes it.
    wait_until(lambda: last_seen(api, job_id, "holder") != seen, 10, 0.02, "the heartbeat to reach the server")
    waiting = Waiting(api, job_id, "idle")
    waiting.start()  # finds nothing, asks for a split, waits
    beating.join(WAIT + 10)
    assert heartbeat["seconds"] < WAIT / 2, heartbeat
    at = heartbeat["answer"]["splits"][str(held["id"])]
    cut = api.post(f"/api/v1/leases/{held['id']}/split/", {"token": held["token"], "at": at}).json()
    result = waiting.result()
    assert result.status == 200 and result.seconds < WAIT / 2
    (remainder,) = result.answer["leases"]
    assert (remainder["id"], remainder["start"], remainder["end"]) == (cut["remainder"], at, 1000)


def test_in_a_jobs_tail_a_held_heartbeat_returns_for_a_fresh_position(api):
    # Held all it asked (3 s from the SDK), a heartbeat's position was that
    # many seconds old when the split planner read it: a slow holder that
    # had read nothing at its first report looked like one of unknown pace.
    job_id = create(api, ["/f.csv?start=0&end=1000"])
    held = take(api, job_id, "holder")["leases"][0]  # nothing pending: the job is in its tail
    ref = {"id": held["id"], "token": held["token"], "position": 0}
    began = time.monotonic()
    answer = api.post("/api/v1/leases/extend/", {"leases": [ref], "wait": WAIT}).json()
    assert time.monotonic() - began < WAIT / 2
    assert answer["heartbeat_in"] == 0 and answer["splits"] == {}  # held, and the next leaves at once


def test_a_refused_split_wakes_the_take_and_it_asks_another_holder(api):
    job_id = create(api, ["/f.csv?start=0&end=1000", "/g.csv?start=0&end=1000"], shuffle=False)
    refs = []
    for holder in ("holder-a", "holder-b"):
        held = take(api, job_id, holder)["leases"][0]
        refs.append({"id": held["id"], "token": held["token"], "position": 0})
        assert api.post("/api/v1/leases/extend/", {"leases": [refs[-1]]}).ok

    def asked(ref):
        return api.post("/api/v1/leases/extend/", {"leases": [ref]}).json()["splits"]

    waiting = Waiting(api, job_id, "idle")
    waiting.start()  # finds nothing, asks one holder for a split, waits
    wait_until(lambda: any(asked(ref) for ref in refs), 10, 0.02, "a split to be asked")
    first, other = refs if asked(refs[0]) else refs[::-1]
    assert not asked(other)
    refusal = api.post(f"/api/v1/leases/{first['id']}/split/", {"token": first["token"], "at": 1000}).json()
    assert not refusal["split"]
    # Woken by the refusal, the take asks the other holder at once, not when its wait ends.
    began = time.monotonic()
    wait_until(lambda: asked(other), WAIT / 2, 0.02, "the other holder to be asked")
    assert time.monotonic() - began < WAIT / 2 and waiting.is_alive()
    # The other holder cuts: the take leases the rest and returns (left
    # waiting, it was cut off unanswered as the session's server stopped).
    at = asked(other)[str(other["id"])]
    cut = api.post(f"/api/v1/leases/{other['id']}/split/", {"token": other["token"], "at": at}).json()
    result = waiting.result()
    assert result.status == 200 and [lease["id"] for lease in result.answer["leases"]] == [cut["remainder"]]


def test_a_consumer_that_starts_waiting_ends_the_waits_on_its_leases(api):
    # b1 (consumer B) holds /b. a2 waits for it: B is not waiting, so its
    # lease is worth waiting for. Then B's process says it waits at the end
    # of a queue (its heartbeat's waiting mark): its lease may be stuck
    # behind that wait, so a2 stops waiting for it at once, not when its wait
    # ends (two DataLoaders waiting on each other's loaders hung so).
    job_id = create(api, ["/a", "/b"], shuffle=False)
    assert api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "a1", "consumer": "A"}).ok  # a2's sibling
    held = take(api, job_id, "b1")["leases"][0]
    waiting = started_waiting(api, job_id, "a2", consumer="A")
    ref = {"id": held["id"], "token": held["token"]}
    assert api.post("/api/v1/leases/extend/", {"leases": [ref], "waiting": True}).ok
    result = waiting.result()
    assert result.status == 200 and result.seconds < WAIT / 2
    assert (result.answer["leases"], result.answer["waiting_on"], result.answer["leased_by_others"]) == ([], 0, 2)


def test_the_end_of_the_job_wakes_every_waiting_take(api):
    job_id = create(api, ["/a"])
    held = take(api, job_id, "holder")["leases"][0]
    waiting = [started_waiting(api, job_id, f"idle-{i}") for i in range(3)]
    assert api.post(f"/api/v1/leases/{held['id']}/complete/", {"token": held["token"]}).ok
    for result in (w.result() for w in waiting):
        assert result.status == 200 and result.answer["exhausted"] and result.seconds < WAIT / 2


def slow_one_deferred(api: Api, database_url: str) -> tuple[int, dict, Waiting]:
    """A job of 6 items near its end, one in hand for each of two workers of 1 s an item and a third of 4 s.

    The slow one's take, waiting, is deferred: the item it would get the fast
    ones finish sooner. Returns the job, the leases in hand and that take.
    """
    job_id = create(api, [f"/d/{i}" for i in range(6)], shuffle=False)
    held = {name: take(api, job_id, name)["leases"][0] for name in ("fast-1", "fast-2", "slow")}
    with psycopg.connect(database_url, autocommit=True) as db:
        for name, done, busy in (("fast-1", 50, 50.0), ("fast-2", 50, 50.0), ("slow", 10, 40.0)):
            db.execute(
                "UPDATE shardline_worker SET items_done = %s, records_done = %s, busy_seconds = %s"
                " WHERE job_id = %s AND name = %s",
                [done, done, busy, job_id, name],
            )
    seen = last_seen(api, job_id, "slow")
    waiting = Waiting(api, job_id, "slow")
    waiting.start()
    wait_until(lambda: last_seen(api, job_id, "slow") != seen, 10, 0.02, "the slow worker's take to run")
    return job_id, held, waiting


def test_a_deferred_take_waits_on_the_server_and_the_jobs_end_answers_it(api, test_database_url):
    # Near a job's end a much slower worker is deferred (given nothing while
    # the faster ones finish). Told to ask again in half a second, it slept
    # that out after the job had ended: its loop ended up to 0.5 s late.
    job_id, held, waiting = slow_one_deferred(api, test_database_url)
    # The fast workers take the rest and finish; the last completion ends the job.
    rest = api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "fast-1", "count": 3}).json()["leases"]
    assert [lease["item"] for lease in rest] == ["/d/3", "/d/4", "/d/5"]
    assert waiting.is_alive()  # still waiting: deferred, not leased
    # Its own first: with the others' leases in hand, the take (as it runs
    # again every half second) has them to wait for until the job's end.
    for lease in [held["slow"], *rest, held["fast-1"], held["fast-2"]]:
        assert api.post(f"/api/v1/leases/{lease['id']}/complete/", {"token": lease["token"]}).ok
    result = waiting.result()
    assert result.status == 200 and result.answer["exhausted"] and result.seconds < WAIT / 2, result.answer


def test_a_deferred_take_answered_at_once_says_it_is_deferred(api, test_database_url):
    # A take that does not wait (the SDK's first after a range, before its
    # process is marked at its end) is answered at once. It says why nothing
    # came, so that the SDK asks again at once with a wait, held on the
    # server, and does not sleep out retry_after through the job's end.
    job_id, held, waiting = slow_one_deferred(api, test_database_url)
    at_once = take(api, job_id, "slow")
    assert at_once["leases"] == [] and at_once["deferred"] and not at_once["exhausted"], at_once
    rest = api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "fast-1", "count": 3}).json()
    assert [lease["item"] for lease in rest["leases"]] == ["/d/3", "/d/4", "/d/5"] and not rest["deferred"]
    for lease in [held["slow"], *rest["leases"], held["fast-1"], held["fast-2"]]:
        assert api.post(f"/api/v1/leases/{lease['id']}/complete/", {"token": lease["token"]}).ok
    result = waiting.result()
    assert result.status == 200 and result.answer["exhausted"] and not result.answer["deferred"], result.answer


def test_an_item_that_comes_back_wakes_an_idle_take_not_a_deferred_one(test_database_url, live_keys):
    # A pending item wakes as many waiting takes as items came, the oldest
    # first. The deferred one, waiting longest, took that wake and stayed
    # deferred, and the idle worker's take slept on with the item pending.
    server = ServerProcess(test_database_url, workers=1).start()  # one process: one list of waiters
    try:
        api = Api(server.url, live_keys["worker"])
        job_id, held, deferred = slow_one_deferred(api, test_database_url)
        rest = api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "fast-1", "count": 3}).json()["leases"]
        # A worker with nothing in hand waits for the others' leases. Nothing
        # finished meanwhile: a completion would wake the deferred take,
        # which then waited anew, after this one.
        idle = started_waiting(api, job_id, "idle")
        failed = rest[0]
        assert api.post(f"/api/v1/leases/{failed['id']}/fail/", {"token": failed["token"], "error": "disk"}).ok
        result = idle.result()
        assert result.status == 200 and result.seconds < WAIT / 2, (result.seconds, result.answer)
        assert [lease["item"] for lease in result.answer["leases"]] == [failed["item"]], result.answer
        assert deferred.is_alive()  # still deferred, still waiting
        # The job ends, and with it the deferred take's wait.
        for lease in [held["slow"], *rest[1:], *result.answer["leases"], held["fast-1"], held["fast-2"]]:
            assert api.post(f"/api/v1/leases/{lease['id']}/complete/", {"token": lease["token"]}).ok
        assert deferred.result().answer["exhausted"]
    finally:
        server.stop()


def test_a_take_that_leaves_is_answered_at_once_whatever_it_asks_to_wait(api):
    # A loader that leaves should its take find nothing (its sibling reads)
    # is never held, even with wait: its caller stops taking instead.
    job_id = create(api, ["/a", "/b"])
    assert api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "main:loader0", "consumer": "main"}).ok
    take(api, job_id, "other")
    began = time.monotonic()
    body = {"worker": "main:loader1", "consumer": "main", "wait": WAIT, "leave": True}
    response = api.post(f"/api/v1/jobs/{job_id}/leases/", body)
    assert response.status_code == 200 and response.json()["leases"] == [], response.text
    assert response.json()["waiting_on"] == 1  # other's lease: worth waiting for, but this take leaves
    assert time.monotonic() - began < WAIT / 2
    assert not worker_waits(api, job_id, "main:loader1")


def test_a_cancel_wakes_a_waiting_take_with_the_reason(api, live_api):
    job_id = create(api, ["/a"])
    take(api, job_id, "holder")
    waiting = started_waiting(api, job_id, "idle")
    assert live_api("admin").post(f"/api/v1/jobs/{job_id}/cancel/").ok
    result = waiting.result()
    assert result.status == 409 and result.answer["error"] == "job_cancelled" and result.seconds < WAIT / 2


def test_a_client_that_goes_away_while_waiting_leaves_no_waiter(test_database_url, live_keys):
    server = ServerProcess(test_database_url, workers=1).start()  # one process: its gauge is the whole count
    try:
        api = Api(server.url, live_keys["worker"])
        job_id = create(api, ["/a"])
        take(api, job_id, "holder")
        body = f'{{"worker": "gone", "wait": {WAIT}}}'.encode()
        request = (
            f"POST /api/v1/jobs/{job_id}/leases/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Token {live_keys['worker']}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        with socket.create_connection(("127.0.0.1", server.port)) as client:
            client.sendall(request)
            wait_until(lambda: waiting_takes(api) == 1, 10, 0.05, "the take to wait")
        # The connection closed mid-wait: the server drops the waiter at once.
        wait_until(lambda: waiting_takes(api) == 0, 5, 0.05, "the waiter to go")
        assert take(api, job_id, "after")["leases"] == []  # and the server goes on answering
    finally:
        server.stop()
