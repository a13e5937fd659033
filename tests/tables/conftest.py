"""Real Delta and Iceberg tables for the lakehouse tests, and jobs made of them through the running server.

The Celery worker that slices is one process for the whole session, started
with this process's environment: the Iceberg catalog it knows is configured
here, when the tests are collected (before any fixture starts it), as an
operator would, through pyiceberg's PYICEBERG_CATALOG__<NAME>__* variables.
Tests that call the slicer in-process configure a catalog of their own with
monkeypatch (server/tables/lakehouse.py reads the configuration afresh).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import struct
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from ..sdk.conftest import sdk_env  # noqa: F401  (the SDK tests' environment fixture)
from ..slicing.conftest import drain
from ..support import wait_until

LIVE_CATALOG = "shardline-tests"
_LIVE_HOME = Path(tempfile.mkdtemp(prefix="shardline-iceberg-"))
atexit.register(shutil.rmtree, _LIVE_HOME, True)


def catalog_environment(name: str, home: Path) -> dict[str, str]:
    """pyiceberg's configuration of a SQL catalog (a SQLite file) with its warehouse under ``home``.

    pyiceberg reads a '_' in a variable's name as '-': ``name`` is spelled with '-'.
    """
    prefix = f"PYICEBERG_CATALOG__{name.upper().replace('-', '_')}__"
    return {
        prefix + "TYPE": "sql",
        prefix + "URI": f"sqlite:///{home}/catalog.db",
        prefix + "WAREHOUSE": f"file://{home}/warehouse",
    }


os.environ.update(catalog_environment(LIVE_CATALOG, _LIVE_HOME))
# The server reads an Iceberg table only when its catalog is a data root (its
# warehouse is a local folder: tests/settings.py allows those).
os.environ["SHARDLINE_DATA_ROOTS"] = ",".join(
    [*filter(None, os.environ.get("SHARDLINE_DATA_ROOTS", "").split(",")), f"iceberg://{LIVE_CATALOG}"]
)


def open_catalog(name: str, home: Path):
    from pyiceberg.catalog.sql import SqlCatalog

    uri, warehouse = f"sqlite:///{home}/catalog.db", f"file://{home}/warehouse"
    return SqlCatalog(name, uri=uri, warehouse=warehouse)


def rows(ids, parts: int = 3) -> pa.Table:
    """Rows ``ids`` with a partition column ``part`` (id % parts) and a ``value``."""
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": pa.array([i % parts for i in ids], pa.int64()),
            "value": pa.array([f"v{i}" for i in ids]),
        }
    )


@pytest.fixture
def live_iceberg():
    """``live_iceberg(*batches, partitioned=True)``: an Iceberg table of the Celery worker's catalog, one snapshot per batch.

    Returns (work, table); the work is ``iceberg://shardline-tests/<namespace>.t``.
    """
    catalog = open_catalog(LIVE_CATALOG, _LIVE_HOME)
    namespace = f"ns_{uuid.uuid4().hex[:10]}"
    catalog.create_namespace(namespace)

    def create(*batches: pa.Table, partitioned: bool = True):
        table = make_iceberg_table(catalog, f"{namespace}.t", partitioned)
        for batch in batches:
            table.append(batch)
        return f"iceberg://{LIVE_CATALOG}/{namespace}.t", table

    return create


def make_iceberg_table(catalog, identifier: str, partitioned: bool):
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "part", LongType(), required=False),
        NestedField(3, "value", StringType(), required=False),
    )
    spec = (
        PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="part"))
        if partitioned
        else PartitionSpec()
    )
    return catalog.create_table(identifier, schema=schema, partition_spec=spec)


@pytest.fixture
def create_job(live_api, celery_worker):
    """``create_job(works, num_slices)``: a job made through the API, once its slicing ended (ready or failed)."""
    api = live_api("worker")

    def create(works, num_slices=None, **fields):
        body = {"name": f"tables-{uuid.uuid4().hex[:12]}", "works": list(works), "shuffle": False, **fields}
        if num_slices is not None:
            body["num_slices"] = num_slices
        response = api.post("/api/v1/jobs/", body)
        assert response.status_code == 201, response.text
        job_id = response.json()["id"]
        return wait_until(lambda: sliced(api.get(f"/api/v1/jobs/{job_id}/").json()), 60, 0.1, "slicing to finish")

    return create


def sliced(job: dict) -> dict | None:
    """The job once its slicing ended (ready or failed), None while it slices."""
    return job if job["state"] != "slicing" else None


@pytest.fixture
def read_job(live_api):
    """``read_job(job)``: the ids of every row its items hold, leasing and completing them all."""
    from worker_sdk import readers

    def read(job) -> list[int]:
        return [
            row["id"] for item, offset in drain(live_api("worker"), job["id"]) for row in readers.records(item, offset)
        ]

    return read


# -- deletes kept beside the data files, which the libraries cannot write ------


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85(data: bytes) -> str:
    text = []
    for index in range(0, len(data), 4):
        (number,) = struct.unpack(">I", data[index : index + 4])
        text.append("".join(_Z85[number // 85**power % 85] for power in (4, 3, 2, 1, 0)))
    return "".join(text)


def delete_with_a_deletion_vector(table_path: Path, positions: list[int]) -> None:
    """Commits a DELETE of the rows at ``positions`` of the table's first file as a deletion vector, as Spark does.

    deltalake 1.6 rewrites files on DELETE and cannot write deletion vectors;
    this commit follows the Delta protocol: the file is removed and added back
    with an inline vector (a RoaringBitmapArray of the deleted positions, Z85
    encoded) that deltalake itself decodes (``DeltaTable.deletion_vectors``).
    """
    log = table_path / "_delta_log"
    commits = sorted(log.glob("*.json"))
    add = next(
        json.loads(line)["add"]
        for commit in commits
        for line in commit.read_text().splitlines()
        if line.startswith('{"add"')
    )
    positions = sorted(positions)
    # One 32-bit roaring bitmap (no run containers): one array container of the positions.
    roaring = struct.pack("<II", 12346, 1) + struct.pack("<HH", 0, len(positions) - 1) + struct.pack("<I", 16)
    roaring += b"".join(struct.pack("<H", position) for position in positions)
    vector = struct.pack("<i", 1681511377) + struct.pack("<q", 1) + struct.pack("<i", 0) + roaring
    descriptor = {
        "storageType": "i",
        "pathOrInlineDv": _z85(vector + b"\0" * (-len(vector) % 4)),
        "sizeInBytes": len(vector),
        "cardinality": len(positions),
    }
    now = int(time.time() * 1000)
    actions = [
        {"commitInfo": {"timestamp": now, "operation": "DELETE", "operationParameters": {"predicate": "test"}}},
        {
            "remove": {
                "path": add["path"],
                "deletionTimestamp": now,
                "dataChange": True,
                "extendedFileMetadata": True,
                "partitionValues": add["partitionValues"],
                "size": add["size"],
            }
        },
        {"add": {**add, "modificationTime": now, "deletionVector": descriptor}},
    ]
    (log / f"{len(commits):020d}.json").write_text("".join(json.dumps(action) + "\n" for action in actions))


def delete_with_a_position_delete_file(table, positions: list[int]) -> None:
    """Commits a position delete file for the rows at ``positions`` of the table's first data file.

    pyiceberg 0.12 deletes by rewriting files (merge-on-read falls back to
    copy-on-write), so the delete file is written here with pyarrow and
    committed in a delete manifest (content "deletes") through pyiceberg's
    own snapshot producer; pyiceberg's scans then apply it.
    """
    import pyarrow.parquet as pq
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, ManifestWriterV2
    from pyiceberg.typedef import Record

    target = sorted(task.file.file_path for task in table.scan().plan_files())[0]
    path = Path(table.location().removeprefix("file://")) / "data" / f"deletes-{uuid.uuid4().hex[:8]}.parquet"
    # The reserved field ids of a position delete file's columns (Iceberg spec).
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": "2147483546"}),
            pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": "2147483545"}),
        ]
    )
    pq.write_table(pa.table({"file_path": [target] * len(positions), "pos": sorted(positions)}, schema=schema), path)
    delete = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=f"file://{path}",
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=len(positions),
        file_size_in_bytes=path.stat().st_size,
    )
    delete.spec_id = table.spec().spec_id

    class DeleteManifestWriter(ManifestWriterV2):
        def content(self):
            return ManifestContent.DELETES

        @property
        def _meta(self):
            return {**super()._meta, "content": "deletes"}

    with table.transaction() as transaction:
        append = transaction.update_snapshot().fast_append()
        data_writer = append.new_manifest_writer

        def delete_writer(spec):
            writer = data_writer(spec)
            writer.__class__ = DeleteManifestWriter
            return writer

        append.new_manifest_writer = delete_writer
        append.append_data_file(delete)
        append.commit()
