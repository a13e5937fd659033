"""A Postgres table sliced as of one snapshot (the reading side is worker_sdk/pgtable.py).

The work names a connection (``postgresql://NAME?table=...``) that the admin
defined with its own credentials (server/data_policy.py); the slicer connects
with those, and hands readers only the connection's address
(``source["connection"]``: host, port, database, sslmode), never its user or
password: each worker connects with its own.

One REPEATABLE READ, READ ONLY transaction on the table's database counts
its rows and finds the key of each slice's first row; its snapshot
(``pg_current_snapshot()``) goes into every item as ``as_of``, so that every
reader, in every run, sees the rows this transaction saw. The transaction is
held from the count to the key source (both must see the same rows) and
ended when slicing ends.

The source come from one scan of the key index in order (``row_number()``
over the key, kept where it equals a slice's start): about a second per few
million rows (bench/RESULTS.md), and no row data leaves the server.

What a connection attempt or a failed statement says (a host that does not
resolve, a refused port, a failed password) goes to the server's log only:
the job's error names the connection and the kind of failure, so a work
cannot be used to probe what the server can reach.
"""

from __future__ import annotations

import logging

from django.db import connection as own_connection

from worker_sdk import formats, pgtable

from .. import data_policy, sources

log = logging.getLogger("shardline.tables")

# A database is known by its name and its server's start time (readable by
# any user, unlike pg_control_system() on some installations): equal on two
# connections means one database, whatever address each used.
IDENTITY = "SELECT current_database(), pg_postmaster_start_time()::text"
# libpq waits forever for an unreachable host by default.
CONNECT_TIMEOUT = "10"


class Pinned:
    """A table's slicing transaction: its connection, key columns, snapshot and the address readers are given."""

    def __init__(self, connection, key: list[str], as_of: str, address: dict, name: str):
        self.connection, self.key, self.as_of, self.address, self.name = connection, key, as_of, address, name

    def close(self) -> None:
        self.connection.close()  # read only: nothing to commit


def expand(work: str) -> tuple[list[sources.Work], dict]:
    psycopg, sql = pgtable.require_psycopg()
    shown = formats.redact(work)
    name, definition = data_policy.connection(work)
    params = {"connect_timeout": CONNECT_TIMEOUT, **definition["params"], "application_name": "shardline-slicer"}
    try:
        connection = psycopg.connect(**params, autocommit=False)
    except psycopg.Error as exc:
        _log_failure(name, "connect", exc)
        raise sources.SourceError(
            f"{shown}: cannot connect through connection {name!r} (an admin finds why in the server's log)"
        ) from None
    try:
        if not definition.get(data_policy.ALLOW_OWN_DATABASE) and _identity(connection) == _own_identity():
            raise sources.SourceError(data_policy.own_database_refused(shown, name))
        connection.rollback()  # the identity check's transaction: the isolation level is set before the next
        connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        connection.read_only = True
        key = pgtable.key_columns(connection, work)
        as_of = connection.execute("SELECT pg_current_snapshot()::text").fetchone()[0]
        table = sql.SQL(".").join(sql.Identifier(part) for part in pgtable.table_name(work))
        rows = connection.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()[0]
    except sources.SourceError:
        connection.close()
        raise
    except pgtable.TableError as exc:
        connection.close()
        raise sources.SourceError(str(exc)) from None
    except psycopg.Error as exc:
        connection.close()
        raise sources.SourceError(_read_failed(shown, name, exc)) from None
    pinned = sources.Work(
        formats.table_slice_path(work, as_of),
        formats.POSTGRES,
        records=rows,
        counted=True,
        table=Pinned(connection, key, as_of, pgtable.public_address(params), name),
    )
    record = {"work": shown, "kind": formats.POSTGRES, "version": as_of, "rows": rows, "files": None, "key": key}
    return [pinned], record


def _identity(connection) -> tuple:
    return tuple(connection.execute(IDENTITY).fetchone())


def _own_identity() -> tuple:
    with own_connection.cursor() as cursor:
        cursor.execute(IDENTITY)
        return tuple(cursor.fetchone())


def _read_failed(shown: str, name: str, exc: Exception) -> str:
    _log_failure(name, "read", exc)
    # The error's class (InsufficientPrivilege, QueryCanceled...) says what
    # kind of failure it was; its text stays in the log.
    return f"{shown}: cannot be read through connection {name!r} ({type(exc).__name__}; the server's log says more)"


def _log_failure(name: str, step: str, exc: Exception) -> None:
    # libpq's messages name hosts, addresses and users, never a password.
    log.warning(
        "table connection failed",
        extra={
            "event": "table_connection_failed",
            "connection": name,
            "step": step,
            "reason": pgtable.error_summary(exc),
        },
    )


def source_of(work: sources.Work, starts: list[int]) -> list[dict]:
    """{"key", "from", "to", "first", "connection"} per slice starting at ``starts`` (in order), in the slicing snapshot.

    One pass over the key index with a cursor: MOVE skips to each slice's
    first row on the server and FETCH returns its key, so no other key
    leaves the server. (A row_number() filtered on the starts took 36 s on
    10 million rows: the filter tested every row against the list; this is
    one index-only scan, about a second.)
    """
    psycopg, sql = pgtable.require_psycopg()
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
        raise sources.SourceError(_read_failed(formats.redact(work.path), pinned.name, exc)) from None
    if len(found) < len(set(starts)):
        raise sources.SourceError(f"{formats.redact(work.path)}: rows changed while it was sliced")
    return [
        {
            "key": pinned.key,
            "from": found[start],
            "to": found[starts[i + 1]] if i + 1 < len(starts) else None,
            "first": start,
            "connection": pinned.address,
        }
        for i, start in enumerate(starts)
    ]
