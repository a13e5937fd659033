"""Postgres tables as works, through the real server, Celery and reader processes.

The source tables live in a schema of their own in the ``sources``
database (tests/slicing/pg_sources.py), which the server reaches through the
named connection ``sources``; each test names its tables so:
postgresql://sources?table=schema.name. Reader processes connect with their
own credentials (PGUSER) to the address their leases carry.
"""

import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from urllib.parse import quote

import psycopg
import pytest

from ..conftest import start_celery_worker
from ..support import ROOT, Api, ServerProcess, wait_until
from .conftest import drain
from .pg_sources import reader_environment

READER = ROOT / "tests" / "slicing" / "table_reader.py"


@pytest.fixture
def source(source_database):
    """A schema of its own in the sources database, and a connection to it that commits each statement."""
    schema = f"src_{uuid.uuid4().hex[:8]}"
    connection = psycopg.connect(source_database, autocommit=True)
    connection.execute(f"CREATE SCHEMA {schema}")
    yield schema, connection
    connection.execute(f"DROP SCHEMA {schema} CASCADE")
    connection.close()


def table_work(table: str, **params) -> str:
    query = "&".join([f"table={table}", *(f"{k}={quote(str(v), safe=',')}" for k, v in params.items())])
    return f"postgresql://sources?{query}"


def read_with_processes(sdk_env, name: str, work: str, slices: int, processes: int) -> Counter:
    children = [
        subprocess.Popen(
            [sys.executable, str(READER), "--name", name, "--slices", str(slices), "--worker", f"reader-{i}", work],
            cwd=ROOT,
            env={**reader_environment(), **sdk_env, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    read = Counter()
    for child in children:
        out, err = child.communicate(timeout=90)
        assert child.returncode == 0, err[-3000:]
        read.update(int(line.split()[1]) for line in out.splitlines() if line.startswith("id "))
    return read


def sliced_queue(work: str, slices: int, name: str):
    from worker_sdk import WorkQueue

    queue = WorkQueue([work], shuffle=False, num_slices=slices, name=name)
    job = queue.job
    ready = wait_until(
        lambda: (lambda j: j if j["state"] != "slicing" else None)(queue._client.job(job["id"])),
        60,
        0.1,
        "slicing to end",
    )
    return queue, ready


@pytest.mark.timeout(180)
def test_a_million_row_table_is_read_exactly_once_by_four_workers(sdk_env, celery_worker, source):
    schema, connection = source
    connection.execute(f"CREATE TABLE {schema}.events (id bigint PRIMARY KEY, payload text NOT NULL)")
    connection.execute(f"INSERT INTO {schema}.events SELECT g, 'event ' || g FROM generate_series(1, 1000000) AS g")
    work = table_work(f"{schema}.events")
    name = f"table-{uuid.uuid4().hex[:6]}"
    queue, job = sliced_queue(work, 40, name)
    assert job["state"] == "ready", job["error"]
    assert job["units_count"] == 40
    (pinned,) = job["tables"]
    assert (pinned["kind"], pinned["rows"], pinned["key"]) == ("postgres", 1_000_000, ["id"])
    read = read_with_processes(sdk_env, name, work, 40, 4)
    assert sum(read.values()) == len(read) == 1_000_000  # none twice
    assert min(read) == 1 and max(read) == 1_000_000  # and, with the count, none missing
    assert queue.watermarks()["done"] == queue.watermarks()["total"]


@pytest.mark.timeout(120)
def test_rows_inserted_after_slicing_are_not_read_whatever_their_key(sdk_env, celery_worker, source):
    schema, connection = source
    # A composite key whose new rows fall inside existing slices, not only after the last.
    connection.execute(f"CREATE TABLE {schema}.pairs (a text, b int, v int NOT NULL, PRIMARY KEY (a, b))")
    connection.execute(f"INSERT INTO {schema}.pairs SELECT 'k' || (g % 7), g, g FROM generate_series(1, 7000) AS g")
    work = table_work(f"{schema}.pairs")
    name = f"pairs-{uuid.uuid4().hex[:6]}"
    _queue, job = sliced_queue(work, 9, name)
    assert job["state"] == "ready", job["error"]
    connection.execute(f"INSERT INTO {schema}.pairs SELECT 'k' || (g % 7), g, -g FROM generate_series(7001, 9000) AS g")
    connection.execute(f"INSERT INTO {schema}.pairs VALUES ('k0', -5, -1), ('k3', 3500, -1), ('zz', 1, -1)")
    from worker_sdk import WorkQueue, readers

    queue = WorkQueue([work], shuffle=False, num_slices=9, name=name)
    values = [row["v"] for item in queue.items() for row in readers.records(item)]
    assert sorted(values) == list(range(1, 7001))  # the rows the slicing saw, each once, none added since


@pytest.mark.timeout(120)
def test_a_table_without_a_key_fails_the_job_naming_it_and_a_unique_index_can_be_named(make_job, source):
    schema, connection = source
    connection.execute(f"CREATE TABLE {schema}.loose (code text NOT NULL, note text)")
    connection.execute(f"INSERT INTO {schema}.loose SELECT 'c' || g, 'n' FROM generate_series(1, 100) AS g")
    failed = make_job([table_work(f"{schema}.loose")], 4)
    assert failed["state"] == "failed"
    assert f"table={schema}.loose: the table has no primary key" in failed["error"]
    assert "key=a,b" in failed["error"]

    connection.execute(f"CREATE UNIQUE INDEX ON {schema}.loose (code)")
    named = table_work(f"{schema}.loose", key="code")
    ready = make_job([named], 4, name=f"{uuid.uuid4().hex[:8]}-named")
    assert ready["state"] == "ready" and ready["units_count"] == 4 and ready["tables"][0]["key"] == ["code"]

    not_unique = table_work(f"{schema}.loose", key="note")
    refused = make_job([not_unique], 4, name=f"{uuid.uuid4().hex[:8]}-not-unique")
    assert refused["state"] == "failed" and "key=note is not the columns of a unique index" in refused["error"]


def test_a_missing_table_fails_the_job_naming_it(make_job, source):
    schema, _connection = source
    failed = make_job([table_work(f"{schema}.nowhere")], 4)
    assert failed["state"] == "failed" and f"no table {schema}.nowhere" in failed["error"]


def test_a_work_with_a_password_is_refused_and_kept_nowhere(live_api, job_name):
    api = live_api("worker")
    secret = f"pw-{uuid.uuid4().hex}"
    for work in (
        f"postgresql://reader:{secret}@db.internal/warehouse?table=public.events",
        f"postgresql://reader@db.internal/warehouse?table=public.events&password={secret}",
    ):
        response = api.post("/api/v1/jobs/", {"name": job_name, "works": [work]})
        assert response.status_code == 400, response.text
        assert secret not in response.text and "must not carry a password" in response.text
        assert "***" in response.text
    listed = api.get("/api/v1/jobs/?page_size=500").json()["results"]  # newest first
    assert job_name not in {job["name"] for job in listed}


@pytest.mark.timeout(120)
def test_a_killed_celery_worker_mid_slicing_leaves_the_table_sliced_once(
    test_database_url, live_keys, source, source_database, monkeypatch
):
    schema, connection = source
    connection.execute(f"CREATE TABLE {schema}.events (id bigint PRIMARY KEY)")
    connection.execute(f"INSERT INTO {schema}.events SELECT generate_series(1, 50000)")
    monkeypatch.setenv("SHARDLINE_CELERY_QUEUE", f"shardline-table-kill-{uuid.uuid4().hex[:8]}")
    server = ServerProcess(test_database_url, workers=2).start()
    first = start_celery_worker(test_database_url, "doomed")
    second = None
    blocker = psycopg.connect(source_database)
    try:
        # The first worker's count waits behind this lock, inside its slicing transaction.
        blocker.execute(f"LOCK TABLE {schema}.events IN ACCESS EXCLUSIVE MODE")
        api = Api(server.url, live_keys["worker"])
        body = {"name": f"kill-{uuid.uuid4().hex[:8]}", "works": [table_work(f"{schema}.events")]}
        body["num_slices"], body["shuffle"] = 10, False
        job = api.post("/api/v1/jobs/", body).json()
        wait_until(lambda: _slicer_waits(connection), 60, 0.05, "the first worker's slicing to wait on the table")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        blocker.rollback()
        assert api.get(f"/api/v1/jobs/{job['id']}/").json()["state"] == "slicing"
        second = start_celery_worker(test_database_url, "rescuer")
        ready = wait_until(
            lambda: (lambda j: j if j["state"] != "slicing" else None)(api.get(f"/api/v1/jobs/{job['id']}/").json()),
            60,
            0.2,
            "the second worker to finish slicing",
        )
        assert ready["state"] == "ready", ready["error"]
        assert ready["units_count"] == 10 and len(ready["tables"]) == 1
        items = [item for item, _offset in drain(api, job["id"])]
        assert len(items) == len(set(items)) == 10
    finally:
        blocker.close()
        for worker in (first, second):
            if worker is not None and worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
        server.stop()


def _slicer_waits(connection) -> bool:
    row = connection.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'shardline-slicer' AND wait_event_type = 'Lock'"
    ).fetchone()
    return row[0] > 0


@pytest.mark.tf
def test_a_table_slice_is_a_tf_dataset_of_typed_columns(source):
    tf = pytest.importorskip("tensorflow")
    schema, connection = source
    connection.execute(f"CREATE TABLE {schema}.t (id int PRIMARY KEY, score float8, label text)")
    connection.execute(f"INSERT INTO {schema}.t VALUES (1, 0.5, 'a'), (2, 1.5, 'b'), (3, 2.5, 'c')")
    as_of = connection.execute("SELECT pg_current_snapshot()::text").fetchone()[0]
    from worker_sdk import formats, readers

    item = formats.slice_item(formats.table_slice_path(table_work(f"{schema}.t"), as_of), 1, 3)
    rows = list(readers.dataset(item).as_numpy_iterator())
    assert [(r["id"], r["score"], r["label"]) for r in rows] == [(2, 1.5, b"b"), (3, 2.5, b"c")]
    assert readers.dataset(item).element_spec["id"].dtype == tf.int64
