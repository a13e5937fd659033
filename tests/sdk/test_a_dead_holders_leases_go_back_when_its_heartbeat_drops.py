"""A worker process that dies gives its leases back at once: its waiting heartbeat's connection drops.

The server (gunicorn with uvicorn workers over server.asgi, as `make run`
serves it) holds every SDK process's heartbeat while it holds leases. A
process that dies closes its sockets; a second later, if its holders have
not beaten again, their leases expire and the next take hands them on. A
holder whose connection only blipped, and that beats again within that
second, keeps its lease. Leases here last 60 s: only the dropped heartbeat
can give an item back within these tests' time.
"""

import http.client
import json
import signal
import time
import uuid
from datetime import timedelta
from urllib.parse import urlsplit

import pytest

from server.models import Item
from tests.support import ServerProcess, wait_until

from .test_worker_processes_share_one_job import finished_items, start_worker

LEASE_TIMEOUT = 60

pytestmark = pytest.mark.timeout(120)


def extended(item_id: int, since) -> bool:
    """Whether the lease's expiry moved on from ``since`` (a heartbeat reached the database)."""
    return Item.objects.get(id=item_id).expires_at > since


def test_a_killed_workers_item_goes_back_at_once_not_a_lease_timeout_later(sdk_env, live_api):
    # Its first item takes no time, so its pace is known and it takes the
    # next ahead: it dies holding /items/0001 and, ahead, /items/0002.
    victim = start_worker(
        sdk_env, "victim", 3, 600, name="vigil", lease_timeout=LEASE_TIMEOUT, first_cost=0, look_ahead=1
    )
    for expected in ("start /items/0000", "done /items/0000", "start /items/0001"):
        line = victim.stdout.readline()
        assert line.startswith(expected), line + victim.stderr.read()
    job = next(
        j
        for j in live_api("viewer").get("/api/v1/jobs/?page_size=500").json()["results"]
        if j["name"] == f"vigil.{sdk_env['SHARDLINE_RUN']}"
    )
    leased = Item.objects.filter(job_id=job["id"], state="leased")
    wait_until(lambda: leased.count() == 2, 10, message="the victim's take ahead")
    # A heartbeat of its leases reached the server since (one extends a lease
    # past its lease time; the take that says /items/0001 started moves only
    # that time). The first leaves with the first lease, and the server holds
    # it; if it left before both takes were done, the next comes a third of
    # the lease timeout later.
    beaten = lambda: any(  # noqa: E731
        row.expires_at > row.leased_at + timedelta(seconds=LEASE_TIMEOUT) for row in leased.all()
    )
    wait_until(beaten, LEASE_TIMEOUT / 2, message="a heartbeat of the victim's leases")

    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    killed = time.monotonic()
    survivor = start_worker(sdk_env, "survivor", 3, 0.0, name="vigil", lease_timeout=LEASE_TIMEOUT)
    out, err = survivor.communicate(timeout=40)  # a lease timeout would be 60 s
    assert survivor.returncode == 0, err
    assert time.monotonic() - killed < LEASE_TIMEOUT / 2
    assert sorted(finished_items(out)) == ["/items/0001", "/items/0002"]
    rows = {r["item"]: r for r in live_api("viewer").get(f"/api/v1/jobs/{job['id']}/items/").json()["results"]}
    for name in ("/items/0001", "/items/0002"):  # both the item in hand and the one taken ahead
        assert (rows[name]["state"], rows[name]["worker"], rows[name]["attempts"]) == ("done", "survivor", 2)


@pytest.fixture
def one_process_server(test_database_url):
    # One web process: the checks that follow dropped heartbeats run in the
    # order the drops came, so the second one's result says the first has run.
    server = ServerProcess(test_database_url, workers=1).start()
    yield server
    server.stop()


class Holder:
    """A holder speaking HTTP itself: it takes one item, and holds heartbeats it may drop."""

    def __init__(self, url: str, key: str, job_id: int, name: str):
        parts = urlsplit(url)
        self.address = (parts.hostname, parts.port)
        self.headers = {"Authorization": f"Token {key}", "Content-Type": "application/json"}
        self.job_id, self.name = job_id, name
        self.lease = self.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": name})["leases"][0]

    def post(self, path: str, body: dict) -> dict:
        connection = http.client.HTTPConnection(*self.address, timeout=30)
        try:
            connection.request("POST", path, json.dumps(body), self.headers)
            response = connection.getresponse()
            assert response.status == 200, response.read()
            return json.loads(response.read())
        finally:
            connection.close()

    def beat(self, wait: float = 0.0, **more) -> dict:
        """A heartbeat; with ``wait``, one the server holds up to that long (as the SDK's)."""
        return self.post("/api/v1/leases/extend/", self.body(wait, **more))

    def body(self, wait: float, **more) -> dict:
        return {"leases": [{"id": self.lease["id"], "token": self.lease["token"]}], "wait": wait, **more}

    def drop_a_held_heartbeat(self, **more) -> None:
        """Sends a heartbeat the server holds, and closes the connection once the server has extended the lease."""
        before = Item.objects.get(id=self.lease["id"]).expires_at
        connection = http.client.HTTPConnection(*self.address, timeout=30)
        connection.request("POST", "/api/v1/leases/extend/", json.dumps(self.body(20, **more)), self.headers)
        wait_until(lambda: extended(self.lease["id"], before), 10, message=f"{self.name}'s held heartbeat")
        connection.close()


def test_a_holder_that_beats_again_within_the_grace_keeps_its_lease(one_process_server, live_keys, job_name):
    from tests.support import Api

    api = Api(one_process_server.url, live_keys["worker"])
    works = ["/blip", "/dead"]
    job = api.post("/api/v1/jobs/", {"name": job_name, "works": works, "shuffle": False, "lease_timeout": 60}).json()
    key = live_keys["worker"]
    blip = Holder(one_process_server.url, key, job["id"], f"blip-{uuid.uuid4().hex[:6]}")
    dead = Holder(one_process_server.url, key, job["id"], f"dead-{uuid.uuid4().hex[:6]}")
    assert (blip.lease["item"], dead.lease["item"]) == ("/blip", "/dead")

    blip.drop_a_held_heartbeat()
    assert blip.beat()["extended"]  # at once, as the SDK retries a failed heartbeat
    dead.drop_a_held_heartbeat()  # and never beats again

    # The dead holder's item comes back a second later, to a take that waits.
    taker = f"taker-{uuid.uuid4().hex[:6]}"
    answer = blip.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": taker, "wait": 20})
    assert [lease["item"] for lease in answer["leases"]] == ["/dead"], answer
    # The blip's check ran before (one process, drops in order): its lease is held still.
    assert blip.beat()["extended"] and Item.objects.get(id=blip.lease["id"]).worker == blip.name
    assert Item.objects.get(id=blip.lease["id"]).state == "leased"
    nothing = blip.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": taker})
    assert nothing["leases"] == [] and nothing["waiting_on"] == 1, nothing


def test_a_lease_taken_while_the_held_heartbeat_waited_goes_back_too(one_process_server, live_keys, job_name):
    from tests.support import Api

    api = Api(one_process_server.url, live_keys["worker"])
    job = api.post("/api/v1/jobs/", {"name": job_name, "works": ["/a", "/b"], "shuffle": False, "lease_timeout": 60})
    job = job.json()
    dead = Holder(one_process_server.url, live_keys["worker"], job["id"], f"dead-{uuid.uuid4().hex[:6]}")
    before = Item.objects.get(id=dead.lease["id"]).expires_at
    connection = http.client.HTTPConnection(*dead.address, timeout=30)
    connection.request("POST", "/api/v1/leases/extend/", json.dumps(dead.body(20)), dead.headers)
    wait_until(lambda: extended(dead.lease["id"], before), 10, message="the held heartbeat")
    # Its process takes another item while the heartbeat waits, then dies.
    second = dead.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": dead.name})["leases"]
    assert [lease["item"] for lease in second] == ["/b"]
    connection.close()

    taker = f"taker-{uuid.uuid4().hex[:6]}"
    got = []
    while len(got) < 2:
        answer = dead.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": taker, "wait": 20})
        assert answer["leases"], answer  # a lease timeout would be 60 s: the wait would end with nothing
        got += [lease["item"] for lease in answer["leases"]]
    assert sorted(got) == ["/a", "/b"]


def test_a_holder_that_beats_again_keeps_the_lease_it_took_while_the_dropped_one_waited(
    one_process_server, live_keys, job_name
):
    from tests.support import Api

    api = Api(one_process_server.url, live_keys["worker"])
    works = ["/a", "/b", "/c"]
    job = api.post("/api/v1/jobs/", {"name": job_name, "works": works, "shuffle": False, "lease_timeout": 60}).json()
    blip = Holder(one_process_server.url, live_keys["worker"], job["id"], f"blip-{uuid.uuid4().hex[:6]}")
    before = Item.objects.get(id=blip.lease["id"]).expires_at
    connection = http.client.HTTPConnection(*blip.address, timeout=30)
    connection.request("POST", "/api/v1/leases/extend/", json.dumps(blip.body(20)), blip.headers)
    wait_until(lambda: extended(blip.lease["id"], before), 10, message="the held heartbeat")
    (second,) = blip.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": blip.name})["leases"]
    assert second["item"] == "/b"
    connection.close()
    # The SDK's next heartbeat, at once: every lease it holds, the one taken since included.
    refs = [{"id": lease["id"], "token": lease["token"]} for lease in (blip.lease, second)]
    beat = blip.post("/api/v1/leases/extend/", {"leases": refs})
    assert sorted(beat["extended"]) == sorted(str(lease["id"]) for lease in (blip.lease, second))

    # Another holder's drop, later: when its item comes back, the blip's check has run (one process, in order).
    dead = Holder(one_process_server.url, live_keys["worker"], job["id"], f"dead-{uuid.uuid4().hex[:6]}")
    dead.drop_a_held_heartbeat()
    answer = blip.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": f"taker-{uuid.uuid4().hex[:6]}", "wait": 20})
    assert [lease["item"] for lease in answer["leases"]] == ["/c"], answer
    kept = Item.objects.get(id=second["id"])
    assert (kept.state, kept.worker, kept.token) == ("leased", blip.name, second["token"])


def test_a_restartable_holders_leases_wait_for_its_restart(one_process_server, live_keys, job_name):
    # A LocalWorkMgr's worker is restarted under its name and takes its leases back (tests/deeprec).
    from tests.support import Api

    api = Api(one_process_server.url, live_keys["worker"])
    job = api.post("/api/v1/jobs/", {"name": job_name, "works": ["/r", "/d"], "shuffle": False, "lease_timeout": 60})
    job = job.json()
    restartable = Holder(one_process_server.url, live_keys["worker"], job["id"], f"task-{uuid.uuid4().hex[:6]}")
    dead = Holder(one_process_server.url, live_keys["worker"], job["id"], f"dead-{uuid.uuid4().hex[:6]}")
    restartable.drop_a_held_heartbeat(restartable=True)
    dead.drop_a_held_heartbeat()
    answer = dead.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": f"taker-{uuid.uuid4().hex[:6]}", "wait": 20})
    assert [lease["item"] for lease in answer["leases"]] == ["/d"], answer
    kept = Item.objects.get(id=restartable.lease["id"])
    assert (kept.state, kept.worker) == ("leased", restartable.name)


# A holder that falls silent once a heartbeat of its was answered: between an
# answer and the next heartbeat its process holds no connection, and one that
# died then was noticed only at its lease timeout. A holder that says it
# returns (the SDK's heartbeat thread) is awaited after each answer for a
# third of its lease timeout, 5 s at least (server/holders.py). These leases
# last 15 s and the takes wait 10 s: only that wait can hand an item on in time.
SHORT_LEASE = 15
TAKE_WAIT = 10


def short_job(api, job_name: str, works: list[str]) -> dict:
    body = {"name": job_name, "works": works, "shuffle": False, "lease_timeout": SHORT_LEASE}
    return api.post("/api/v1/jobs/", body).json()


def taken_by_a_waiting_take(holder: Holder) -> list[str]:
    """The items a take of another worker, waiting TAKE_WAIT s, leases."""
    body = {"worker": f"taker-{uuid.uuid4().hex[:6]}", "wait": TAKE_WAIT}
    return [lease["item"] for lease in holder.post(f"/api/v1/jobs/{holder.job_id}/leases/", body)["leases"]]


def test_a_holder_silent_after_its_held_heartbeat_was_answered_gives_its_lease_back(
    one_process_server, live_keys, job_name
):
    from tests.support import Api

    job = short_job(Api(one_process_server.url, live_keys["worker"]), job_name, ["/gone"])
    gone = Holder(one_process_server.url, live_keys["worker"], job["id"], f"gone-{uuid.uuid4().hex[:6]}")
    answer = gone.beat(wait=0.3, returns=True)  # held all it asked, answered, and never followed
    assert answer["extended"] and answer["heartbeat_in"] == 0, answer
    assert taken_by_a_waiting_take(gone) == ["/gone"]


def test_a_holder_silent_after_a_split_was_asked_of_it_gives_its_lease_back(
    one_process_server, live_keys, job_name, test_database_url
):
    import psycopg

    from tests.support import Api

    works = ["/data/f.csv?start=0&end=1000"]
    job = short_job(Api(one_process_server.url, live_keys["worker"]), job_name, works)
    gone = Holder(one_process_server.url, live_keys["worker"], job["id"], f"gone-{uuid.uuid4().hex[:6]}")
    ref = {"id": gone.lease["id"], "token": gone.lease["token"]}
    gone.post("/api/v1/leases/extend/", {"leases": [{**ref, "position": 100}]})
    # It read those 100 records in 10 s: a split is worth asking (committed, for the server to see).
    with psycopg.connect(test_database_url, autocommit=True) as db:
        db.execute(
            "UPDATE shardline_item SET leased_at = now() - interval '10 seconds', read_at = now() WHERE id = %s",
            [gone.lease["id"]],
        )
    idle = gone.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": f"idle-{uuid.uuid4().hex[:6]}"})
    assert idle["leases"] == [] and Item.objects.get(id=gone.lease["id"]).split_at is not None, idle

    # Its heartbeat, which asks to wait, is answered at once with the split;
    # the holder dies before it answers.
    body = {"leases": [{**ref, "position": 101}], "wait": 20, "returns": True}
    answer = gone.post("/api/v1/leases/extend/", body)
    assert answer["splits"] == {str(gone.lease["id"]): Item.objects.get(id=gone.lease["id"]).split_at}, answer
    assert taken_by_a_waiting_take(gone) == works


def test_a_holder_that_beats_again_after_an_answer_keeps_its_lease_and_so_does_one_not_saying_it_returns(
    one_process_server, live_keys, job_name
):
    from tests.support import Api

    job = short_job(Api(one_process_server.url, live_keys["worker"]), job_name, ["/kept", "/older", "/gone"])
    key = live_keys["worker"]
    kept, older, gone = (
        Holder(one_process_server.url, key, job["id"], f"{name}-{uuid.uuid4().hex[:6]}")
        for name in ("kept", "older", "gone")
    )
    assert kept.beat(wait=0.3, returns=True)["heartbeat_in"] == 0
    # A client that does not say it returns (as the SDK before) beats at its own pace: nothing awaits it.
    assert older.beat(wait=0.3)["heartbeat_in"] == 0
    # The next heartbeat of the one that returns, held while the silent one's is awaited.
    before = Item.objects.get(id=kept.lease["id"]).expires_at
    connection = http.client.HTTPConnection(*kept.address, timeout=30)
    try:
        body = json.dumps(kept.body(TAKE_WAIT * 2, returns=True))
        connection.request("POST", "/api/v1/leases/extend/", body, kept.headers)
        wait_until(lambda: extended(kept.lease["id"], before), 10, message="the held heartbeat")
        assert gone.beat(wait=0.3, returns=True)["heartbeat_in"] == 0

        # The silent one's item comes back; the others were answered first, so
        # any check of theirs would have run first (one process, in order).
        assert taken_by_a_waiting_take(gone) == ["/gone"]
        for holder in (kept, older):
            row = Item.objects.get(id=holder.lease["id"])
            assert (row.state, row.worker, row.token) == ("leased", holder.name, holder.lease["token"])
    finally:
        connection.close()
