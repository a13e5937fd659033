"""Delta and Iceberg tables for bench/slicing.py: ``make(kind, folder, args)`` returns the table's work.

A table of --lake-rows rows (id, a label, a 32-byte payload) written as
--lake-files Parquet files, one commit each; made once per folder and kept.
The Iceberg table lives in a SQL catalog (SQLite) under the folder, named
"bench" for pyiceberg through its environment variables.
"""

from __future__ import annotations

import os
from pathlib import Path

CATALOG = "bench"


def batch(start: int, count: int):
    import numpy as np
    import pyarrow as pa

    ids = np.arange(start, start + count, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "label": (ids % 2).astype(np.int64),
            "payload": pa.array([f"{i:032d}" for i in range(start, start + count)]),
        }
    )


def make(kind: str, folder: Path, args) -> str:
    per_file = args.lake_rows // args.lake_files
    if kind == "delta":
        return _delta(folder / "table", per_file, args.lake_files)
    return _iceberg(folder, per_file, args.lake_files)


def _delta(path: Path, per_file: int, files: int) -> str:
    import deltalake

    if not (path / "_delta_log").exists():
        for index in range(files):
            deltalake.write_deltalake(str(path), batch(index * per_file, per_file), mode="append")
    return f"delta://{path}"


def _iceberg(folder: Path, per_file: int, files: int) -> str:
    from pyiceberg.catalog.sql import SqlCatalog

    folder.mkdir(parents=True, exist_ok=True)
    uri, warehouse = f"sqlite:///{folder}/catalog.db", f"file://{folder}/warehouse"
    prefix = f"PYICEBERG_CATALOG__{CATALOG.upper()}__"
    os.environ.update({prefix + "TYPE": "sql", prefix + "URI": uri, prefix + "WAREHOUSE": warehouse})
    catalog = SqlCatalog(CATALOG, uri=uri, warehouse=warehouse)
    if not catalog.table_exists("bench.events"):
        catalog.create_namespace_if_not_exists("bench")
        table = catalog.create_table("bench.events", schema=batch(0, 1).schema)
        for index in range(files):
            table.append(batch(index * per_file, per_file))
    return f"iceberg://{CATALOG}/bench.events"
