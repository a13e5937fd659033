"""Delta Lake and Iceberg tables as works: each job reads one version of the table, every row of it exactly once.

The tables are real: written with deltalake's write_deltalake and pyiceberg
(a SQL catalog on a SQLite file, its warehouse a local folder), sliced by the
session's Celery worker through the running server, read back through the
SDK's Parquet reader. Each table is a few thousand rows at most, a handful of
files per version (one per value of its partition column ``part``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections import Counter

import pytest
from deltalake import DeltaTable, write_deltalake

from server import sources
from server.tables import lakehouse
from worker_sdk import formats

from ..support import ROOT, wait_until
from .conftest import (
    catalog_environment,
    delete_with_a_deletion_vector,
    delete_with_a_position_delete_file,
    make_iceberg_table,
    open_catalog,
    rows,
    sliced,
)


def delta_table(path, *batches, configuration=None) -> str:
    """A Delta table partitioned by ``part``, one version per batch (0, 1, ...); its work."""
    for version, batch in enumerate(batches):
        write_deltalake(
            path,
            batch,
            mode="append" if version else "error",
            partition_by=["part"],
            configuration=configuration if version == 0 else None,
        )
    return f"delta://{path}"


def pinned(job) -> dict:
    (record,) = job["tables"]
    return record


# -- one version, whatever is committed after slicing --------------------------


def test_a_delta_job_records_the_latest_version_and_never_reads_rows_appended_after_slicing(
    tmp_path, create_job, read_job
):
    work = delta_table(tmp_path / "events", rows(range(0, 300)), rows(range(300, 600)), rows(range(600, 900)))
    job = create_job([work], num_slices=20)
    assert job["state"] == "ready", job["error"]
    assert pinned(job) == {"work": work, "kind": "delta", "version": 2, "rows": 900, "files": 9, "key": None}
    assert job["units_count"] == 20

    write_deltalake(tmp_path / "events", rows(range(900, 1200)), mode="append", partition_by=["part"])
    assert sorted(read_job(job)) == list(range(900))


def test_a_delta_version_parameter_reads_that_older_version(tmp_path, create_job, read_job):
    work = delta_table(tmp_path / "events", rows(range(0, 300)), rows(range(300, 600)), rows(range(600, 900)))
    job = create_job([f"{work}?version=1"], num_slices=7)
    assert job["state"] == "ready", job["error"]
    assert (pinned(job)["version"], pinned(job)["rows"], pinned(job)["files"]) == (1, 600, 6)
    assert sorted(read_job(job)) == list(range(600))


def test_an_iceberg_job_records_the_current_snapshot_and_never_reads_rows_appended_after_slicing(
    live_iceberg, create_job, read_job
):
    work, table = live_iceberg(rows(range(0, 300)), rows(range(300, 600)), rows(range(600, 900)))
    current = table.current_snapshot().snapshot_id
    job = create_job([work], num_slices=20)
    assert job["state"] == "ready", job["error"]
    # The snapshot id as text: ids reach 2^63, past what a JavaScript client of the API keeps exactly.
    expected = {"work": work, "kind": "iceberg", "version": str(current), "rows": 900, "files": 9, "key": None}
    assert pinned(job) == expected

    table.append(rows(range(900, 1200)))
    assert table.current_snapshot().snapshot_id != current
    assert sorted(read_job(job)) == list(range(900))


def test_an_iceberg_snapshot_parameter_reads_that_older_snapshot(live_iceberg, create_job, read_job):
    work, table = live_iceberg(rows(range(0, 300)), rows(range(300, 600)), rows(range(600, 900)))
    first = table.snapshots()[0].snapshot_id
    job = create_job([f"{work}?snapshot={first}"], num_slices=5)
    assert job["state"] == "ready", job["error"]
    assert (pinned(job)["version"], pinned(job)["rows"], pinned(job)["files"]) == (str(first), 300, 3)
    assert sorted(read_job(job)) == list(range(300))


# -- deletions ------------------------------------------------------------------


def test_a_delta_version_with_deletion_vectors_fails_the_job_and_the_version_before_it_is_read(
    tmp_path, create_job, read_job
):
    path = tmp_path / "events"
    work = delta_table(path, rows(range(0, 300)), configuration={"delta.enableDeletionVectors": "true"})
    delete_with_a_deletion_vector(path, [3, 7])
    assert len(list(DeltaTable(path).deletion_vectors())) == 1  # deltalake reads the vector back

    failed = create_job([work], num_slices=4)
    assert failed["state"] == "failed"
    assert work in failed["error"] and "version 1 has deletion vectors on 1 file(s)" in failed["error"]
    before = create_job([f"{work}?version=0"], num_slices=4)
    assert before["state"] == "ready", before["error"]
    assert sorted(read_job(before)) == list(range(300))


def test_a_delta_delete_that_rewrites_files_leaves_the_pinned_version_reading_its_own_rows(
    tmp_path, create_job, read_job
):
    path = tmp_path / "events"
    work = delta_table(
        path, rows(range(0, 300)), rows(range(300, 600)), configuration={"delta.enableDeletionVectors": "true"}
    )
    sliced_before = create_job([work], num_slices=8)
    assert sliced_before["state"] == "ready", sliced_before["error"]

    # deltalake 1.6 cannot write deletion vectors even where they are enabled: it rewrites the files.
    metrics = DeltaTable(path).delete("id % 10 = 0")
    assert metrics["num_deleted_rows"] == 60 and metrics["num_copied_rows"] > 0
    assert not list(DeltaTable(path).deletion_vectors())

    sliced_after = create_job([work], num_slices=8)
    assert pinned(sliced_after)["version"] == 2 and pinned(sliced_after)["rows"] == 540
    assert sorted(read_job(sliced_before)) == list(range(600))  # removed from the log, still on disk
    assert sorted(read_job(sliced_after)) == [i for i in range(600) if i % 10]


def test_an_iceberg_snapshot_with_a_delete_file_fails_the_job_naming_the_way_out(live_iceberg, create_job, read_job):
    work, table = live_iceberg(rows(range(0, 300)), partitioned=False)
    before = table.current_snapshot().snapshot_id
    delete_with_a_position_delete_file(table, [3, 7])
    table = table.refresh()
    assert len(table.scan().to_arrow()) == 298  # pyiceberg applies the delete file

    failed = create_job([work], num_slices=4)
    assert failed["state"] == "failed"
    assert f"snapshot {table.current_snapshot().snapshot_id} has delete files" in failed["error"]
    assert "compact it (rewrite_data_files) or read a snapshot without deletes" in failed["error"]
    earlier = create_job([f"{work}?snapshot={before}"], num_slices=4)
    assert earlier["state"] == "ready", earlier["error"]
    assert sorted(read_job(earlier)) == list(range(300))


def test_an_iceberg_delete_that_rewrites_files_leaves_an_older_snapshot_reading_its_own_rows(
    live_iceberg, create_job, read_job
):
    work, table = live_iceberg(rows(range(0, 300)), rows(range(300, 600)))
    before = table.current_snapshot().snapshot_id
    # pyiceberg 0.12 has no merge-on-read: a delete rewrites the files (copy-on-write).
    with pytest.warns(UserWarning, match="Merge on read is not yet supported"):
        table.transaction().set_properties({"write.delete.mode": "merge-on-read"}).commit_transaction()
        table = table.refresh()
        table.delete("id >= 100 and id < 200")
    assert all(not task.delete_files for task in table.refresh().scan().plan_files())

    at_the_delete = create_job([f"{work}?snapshot={before}"], num_slices=6)
    latest = create_job([work], num_slices=6)
    assert pinned(at_the_delete)["rows"] == 600 and pinned(latest)["rows"] == 500
    assert sorted(read_job(at_the_delete)) == list(range(600))
    assert sorted(read_job(latest)) == [i for i in range(600) if not 100 <= i < 200]


# -- where -----------------------------------------------------------------------


def test_a_where_on_a_delta_partition_column_reads_only_its_files(tmp_path, create_job, read_job):
    work = delta_table(tmp_path / "events", rows(range(0, 300)), rows(range(300, 600)))
    job = create_job([f"{work}?where=part=1"], num_slices=5)
    assert job["state"] == "ready", job["error"]
    assert (pinned(job)["rows"], pinned(job)["files"]) == (200, 2)
    assert sorted(read_job(job)) == [i for i in range(600) if i % 3 == 1]


def test_a_where_on_an_iceberg_partition_column_reads_only_its_files(live_iceberg, create_job, read_job):
    work, _table = live_iceberg(rows(range(0, 300)), rows(range(300, 600)))
    job = create_job([f"{work}?where=part=2"], num_slices=5)
    assert job["state"] == "ready", job["error"]
    assert (pinned(job)["rows"], pinned(job)["files"]) == (200, 2)
    assert sorted(read_job(job)) == [i for i in range(600) if i % 3 == 2]


def test_a_where_on_a_column_that_is_not_a_partition_fails_the_job_naming_it(tmp_path, live_iceberg, create_job):
    delta = delta_table(tmp_path / "events", rows(range(0, 30)))
    iceberg, _table = live_iceberg(rows(range(0, 30)))
    for work in (f"{delta}?where=value=v3", f"{iceberg}?where=part=0,value=v3"):
        failed = create_job([work], num_slices=2)
        assert failed["state"] == "failed"
        assert "value is not a partition column (partition columns: part)" in failed["error"]
        assert "only partition columns can be filtered" in failed["error"]


# -- exactly once, across reader processes ----------------------------------------

READER = """
import sys, time
from pathlib import Path
from tests.support import arrive_and_wait
from worker_sdk import WorkQueue
work, name, slices, worker, barrier = sys.argv[1:]
queue = WorkQueue([work], shuffle=False, num_slices=int(slices), name=name, worker=worker)
queue.job
arrive_and_wait(Path(barrier), worker, 3)
for part in queue.ranges():
    for row in part.records():
        print("id", row["id"], row.get("part"), flush=True)
    time.sleep(0.05)  # the work on a slice: the three readers share the slices
queue.close()
"""


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_every_row_is_read_exactly_once_by_three_reader_processes(kind, tmp_path, live_iceberg, sdk_env, celery_worker):
    from worker_sdk import WorkQueue

    batches = [rows(range(start, start + 1000)) for start in (0, 1000, 2000)]
    work = delta_table(tmp_path / "events", *batches) if kind == "delta" else live_iceberg(*batches)[0]
    name = f"{kind}-{uuid.uuid4().hex[:6]}"
    queue = WorkQueue([work], shuffle=False, num_slices=25, name=name)  # 25 slices of 9 files
    job = wait_until(lambda: sliced(queue._client.job(queue.job["id"])), 60, 0.1, "slicing to end")
    assert job["state"] == "ready", job["error"]
    assert job["units_count"] == 25 and pinned(job)["files"] == 9

    barrier = tmp_path / "barrier"
    barrier.mkdir()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", READER, work, name, "25", f"reader-{i}", str(barrier)],
            cwd=ROOT,
            env={**os.environ, **sdk_env, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    read, by_reader = Counter(), []
    for child in children:
        out, err = child.communicate(timeout=90)
        assert child.returncode == 0, err[-3000:]
        found = [line.split()[1:] for line in out.splitlines() if line.startswith("id ")]
        # Every row has its partition column: Iceberg's files hold it, Delta's
        # log does (its readers add it from the lease's source).
        assert all(part == str(int(i) % 3) for i, part in found), found[:5]
        ids = [int(i) for i, _part in found]
        by_reader.append(len(ids))
        read.update(ids)
    assert all(by_reader), by_reader  # every process read a share
    twice = [i for i, n in read.items() if n > 1]
    assert not twice and sorted(read) == list(range(3000)), (twice[:10], 3000 - len(read))
    # An idle reader may have a busy one's slice split (ranges() answers
    # splits): each remainder is an item of its own, done like the rest.
    marks = queue.watermarks()
    assert marks["done"] == marks["total"] >= 25, marks


# -- bad works ----------------------------------------------------------------------


def test_malformed_table_works_are_refused_at_creation_and_write_nothing(live_api):
    api = live_api("worker")
    name = f"bad-{uuid.uuid4().hex[:8]}"
    for work, reason in (
        ("iceberg://cat/notable", "name the catalog and the table: iceberg://catalog/namespace.table"),
        ("delta:///data/events?version=abc", "version must be a number"),
        ("iceberg://cat/ns.t?snapshot=latest", "snapshot must be a number"),
        ("delta:///data/events?where=part", "where takes column=value conditions"),
        ("delta:///data/events?as_of=3", "unknown parameter(s) as_of"),
    ):
        response = api.post("/api/v1/jobs/", {"name": name, "works": [work], "num_slices": 4})
        assert response.status_code == 400, (work, response.text)
        assert reason in response.text, (work, response.text)
    listed = api.get("/api/v1/jobs/?page_size=500").json()["results"]
    assert name not in [job["name"] for job in listed]


def test_a_missing_table_fails_the_job_at_slicing_naming_it(tmp_path, live_iceberg, create_job):
    existing, _table = live_iceberg(rows(range(10)))  # the namespace exists, the table asked for does not
    namespace = existing.rsplit("/", 1)[1].split(".")[0]
    for work, message in (
        (f"delta://{tmp_path}/nowhere", f"no Delta table at {tmp_path}/nowhere"),
        (f"iceberg://shardline-tests/{namespace}.nowhere", f"no table {namespace}.nowhere in catalog shardline-tests"),
    ):
        failed = create_job([work], num_slices=2)
        assert failed["state"] == "failed", work
        assert failed["error"].startswith(work) and message in failed["error"], failed["error"]


def test_a_catalog_that_is_no_data_root_is_refused_at_creation(live_api):
    response = live_api("worker").post(
        "/api/v1/jobs/", {"name": f"tables-{uuid.uuid4().hex[:12]}", "works": ["iceberg://unconfigured/ns.t"]}
    )
    assert response.status_code == 400
    assert "iceberg://unconfigured: outside the allowed data roots" in response.json()["message"]


def test_an_unconfigured_catalog_fails_slicing_saying_how_to_configure_it():
    with pytest.raises(sources.SourceError, match="configure pyiceberg's catalog unconfigured"):
        lakehouse.expand("iceberg://unconfigured/ns.t", None)


# -- in-process: the slicer's answers without a server --------------------------------


@pytest.fixture
def local_catalog(tmp_path, monkeypatch):
    """An Iceberg catalog of this test only, configured for this process as the slicer finds it."""
    name = f"local-{uuid.uuid4().hex[:8]}"
    for key, value in catalog_environment(name, tmp_path).items():
        monkeypatch.setenv(key, value)
    catalog = open_catalog(name, tmp_path)
    catalog.create_namespace("ns")
    return name, catalog


def test_versions_and_snapshots_that_do_not_exist_are_refused_naming_the_latest(tmp_path, local_catalog):
    work = delta_table(tmp_path / "events", rows(range(30)), rows(range(30, 60)))
    with pytest.raises(sources.SourceError, match=r"\?version=5: no version 5 \(the latest is 1\)"):
        lakehouse.expand(f"{work}?version=5", None)
    name, catalog = local_catalog
    table = make_iceberg_table(catalog, "ns.events", partitioned=True)
    table.append(rows(range(30)))
    current = table.current_snapshot().snapshot_id
    with pytest.raises(sources.SourceError, match=rf"no snapshot 12345 \(the current one is {current}\)"):
        lakehouse.expand(f"iceberg://{name}/ns.events?snapshot=12345", None)


def test_a_table_is_located_for_the_data_roots_and_its_data_files_are_listed_sorted(tmp_path, local_catalog):
    assert formats.table_location("delta:///data/events?version=3") == "/data/events"
    assert formats.table_location("delta+s3://bucket/events?where=part=1") == "s3://bucket/events"
    assert formats.table_location("iceberg://prod/db.events?snapshot=1") == "iceberg://prod"

    name, catalog = local_catalog
    table = make_iceberg_table(catalog, "ns.events", partitioned=True)
    table.append(rows(range(90)))
    works, record = lakehouse.expand(f"iceberg://{name}/ns.events", [str(tmp_path)])
    assert [w.path for w in works] == sorted(w.path for w in works) and len(works) == 3
    assert all(w.format == "parquet" and w.counted and not w.forced and w.records == 30 for w in works)
    assert record["rows"] == 90 and record["files"] == 3
    with pytest.raises(sources.SourceError, match="outside the allowed data roots"):
        lakehouse.expand(f"iceberg://{name}/ns.events", [str(tmp_path / "elsewhere")])


def test_a_delta_table_whose_files_name_its_columns_otherwise_is_refused(tmp_path):
    path = tmp_path / "mapped"
    write_deltalake(path, rows(range(30)), configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(sources.SourceError, match=r"version 0 maps its columns \(name mode\)"):
        lakehouse.expand(f"delta://{path}", None)


def test_an_iceberg_where_refuses_files_written_before_the_column_partitioned_the_table(local_catalog):
    name, catalog = local_catalog
    table = make_iceberg_table(catalog, "ns.events", partitioned=False)
    table.append(rows(range(30)))
    with table.update_spec() as spec:
        spec.add_identity("part")
    table.append(rows(range(30, 60)))
    with pytest.raises(sources.SourceError, match="was written before part partitioned the table"):
        lakehouse.expand(f"iceberg://{name}/ns.events?where=part=1", None)
    works, _record = lakehouse.expand(f"iceberg://{name}/ns.events", None)  # without where: every file, whole
    assert sum(w.records for w in works) == 60
