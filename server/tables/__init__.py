"""Tables as works (docs/tables.md): each resolved at slicing to one version, its rows counted, cut into record ranges.

    postgres  a table of a Postgres database: rows as of the slicing
              transaction's snapshot, in key order (tables/postgres.py)
    delta     a Delta Lake table, at one version: its Parquet data files
    iceberg   an Iceberg table, at one snapshot: its Parquet data files
              (tables/lakehouse.py)

``expand`` turns a table work into ``sources.Work`` entries whose records are
already counted, and says what version it pinned (the job records it). The
slicer then cuts them like files; ``source_of`` gives a Postgres slice's key
range (or a Delta file's partition values). Another database needs what postgres.py does: its key columns, a
consistent read of the row count and of the keys at given positions, and a
way for readers to see only the rows of that read (docs/tables.md).
"""

from __future__ import annotations

from worker_sdk import formats

from .. import sources


def expand(work: str, roots: list[str] | None) -> tuple[list[sources.Work], dict]:
    """The table as counted works (and, for the job's record, the version pinned); SourceError naming it if it cannot be.

    ``roots`` as sources.outside_roots takes them, for a lakehouse table's files.
    """
    if formats.table_kind(work) == formats.POSTGRES:
        from . import postgres

        return postgres.expand(work)
    sources.check_roots(formats.table_location(work), roots)
    from . import lakehouse

    return lakehouse.expand(work, roots)


def source_of(work: sources.Work, starts: list[int]) -> list[dict | None]:
    """What a reader of each slice (beginning at ``starts``) needs beyond its item (models.Unit.source); None for files."""
    if work.columns:
        return [{"columns": work.columns}] * len(starts)
    if work.format != formats.POSTGRES:
        return [None] * len(starts)
    from . import postgres

    return postgres.source_of(work, starts)


def release(works: list[sources.Work]) -> None:
    """Ends what slicing held open for the tables (a Postgres snapshot's transaction)."""
    for work in works:
        if work.table is not None:
            work.table.close()
