"""A Postgres table sliced as of one snapshot (the reading side is worker_sdk/pgtable.py).

One REPEATABLE READ, READ ONLY transaction on the table's database counts
its rows and finds the key of each slice's first row; its snapshot
(``pg_current_snapshot()``) goes into every item as ``as_of``, so that every
reader, in every run, sees the rows this transaction saw. The transaction is
held from the count to the key source (both must see the same rows) and
ended when slicing ends.

The source come from one scan of the key index in order (``row_number()``
over the key, kept where it equals a slice's start): about a second per few
million rows (bench/RESULTS.md), and no row data leaves the server.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from worker_sdk import formats, pgtable

from .. import sources


class Pinned:
    """A table's slicing transaction: its connection, key columns and snapshot."""

    def __init__(self, connection, key: list[str], as_of: str):
        self.connection, self.key, self.as_of = connection, key, as_of

    def close(self) -> None:
        self.connection.close()  # read only: nothing to commit


def location(work: str) -> str:
    """``postgresql://host[:port]/database`` of a table work (no user, no parameters)."""
    parts = urlsplit(work)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"postgresql://{host}{port}{parts.path or '/'}"


def expand(work: str) -> tuple[list[sources.Work], dict]:
    psycopg, sql = pgtable._psycopg()
    shown = formats.redact(work)
    try:
        connection = pgtable.connect(work, application_name="shardline-slicer")
    except pgtable.TableError as exc:
        raise sources.SourceError(str(exc)) from None
    try:
        connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        connection.read_only = True
        key = pgtable.key_columns(connection, work)
        as_of = connection.execute("SELECT pg_current_snapshot()::text").fetchone()[0]
        table = sql.SQL(".").join(sql.Identifier(part) for part in pgtable.table_name(work))
        rows = connection.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()[0]
    except pgtable.TableError as exc:
        connection.close()
        raise sources.SourceError(str(exc)) from None
    except psycopg.Error as exc:
        connection.close()
        raise sources.SourceError(f"{shown}: cannot be read ({pgtable._first_line(exc)})") from None
    pinned = sources.Work(
        formats.table_slice_path(work, as_of),
        formats.POSTGRES,
        records=rows,
        counted=True,
        table=Pinned(connection, key, as_of),
    )
    record = {"work": shown, "kind": formats.POSTGRES, "version": as_of, "rows": rows, "files": None, "key": key}
    return [pinned], record


def source_of(work: sources.Work, starts: list[int]) -> list[dict]:
    """{"key", "from", "to", "first"} per slice starting at ``starts`` (in order), in the slicing snapshot.

    One pass over the key index with a cursor: MOVE skips to each slice's
    first row on the server and FETCH returns its key, so no other key
    leaves the server. (A row_number() filtered on the starts took 36 s on
    10 million rows: the filter tested every row against the list; this is
    one index-only scan, about a second.)
    """
    psycopg, sql = pgtable._psycopg()
    pinned: Pinned = work.table
    keys = sql.SQL(", ").join(sql.Identifier(column) for column in pinned.key)
    as_text = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(column)) for column in pinned.key)
    table = sql.SQL(".").join(sql.Identifier(part) for part in pgtable.table_name(work.path))
    found, position = {}, 0
    try:
        pinned.connection.execute(
            sql.SQL("DECLARE shardline_keys NO SCROLL CURSOR FOR SELECT ARRAY[{}] FROM {} ORDER BY {}").format(
                as_text, table, keys
            )
        )
        for start in sorted(set(starts)):
            if start > position:
                pinned.connection.execute(
                    sql.SQL("MOVE FORWARD {} IN shardline_keys").format(sql.Literal(start - position))
                )
            row = pinned.connection.execute("FETCH 1 FROM shardline_keys").fetchone()
            if row is None:
                break
            found[start], position = row[0], start + 1
        pinned.connection.execute("CLOSE shardline_keys")
    except psycopg.Error as exc:
        raise sources.SourceError(f"{formats.redact(work.path)}: cannot be read ({pgtable._first_line(exc)})") from None
    if len(found) < len(set(starts)):
        raise sources.SourceError(f"{formats.redact(work.path)}: rows changed while it was sliced")
    return [
        {
            "key": pinned.key,
            "from": found[start],
            "to": found[starts[i + 1]] if i + 1 < len(starts) else None,
            "first": start,
        }
        for i, start in enumerate(starts)
    ]
