"""Postgres tables: a table's rows as of a snapshot, in key order, read a slice at a time by key range.

A table work ``postgresql://CONNECTION?table=schema.name`` names a
connection the server's admin defined; the server (server/tables/postgres.py)
slices it, with that connection's credentials, in one REPEATABLE READ
transaction: it
counts the rows, records the transaction's snapshot (``as_of`` in every
item) and the key of each slice's first row (``source`` in every lease). A
reader then reads ``WHERE key >= from AND key < to ORDER BY key``: an index
range scan of the table's primary key (or the unique key named by
``key=``), never an OFFSET over the rows before the slice.

Only the rows the snapshot sees are read: a row inserted after it (or by a
transaction still running then) is skipped, so a restarted or restored run
reads the same rows. Postgres keeps no old row versions for us: a row
updated or deleted after the snapshot is read in neither version (docs/tables.md,
"Postgres"). A row's xmin is a 32-bit transaction id; it is widened to the
64-bit id the snapshot is written in by the epoch of the current
transaction id, which every live row's xmin is within 2^31 of.

A reader connects with its own credentials, never the server's (``connect``):
its own ``SHARDLINE_PG_CONNECTION_<NAME>`` URL if its environment has one, else
the address the lease carries (host, port, database, sslmode: no user, no
secret) with libpq's credentials (``PGUSER``, ``PGPASSWORD``, ``~/.pgpass``),
else the libpq service of the connection's name (``pg_service.conf``).
Needs psycopg (``pip install "psycopg[binary]"``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import parse_qs, urlencode, urlsplit

from . import formats

# Rows fetched per round trip of the server-side cursor.
FETCH = 2000
# A worker's own definition of a connection (the server reads the same name).
ENV_PREFIX = "SHARDLINE_PG_CONNECTION_"
# The libpq keywords of a connection that say where it is and how to reach it
# safely: the server hands these to readers (a lease's source["connection"]).
# Never the user, a password, a passfile or options.
PUBLIC_KEYWORDS = ("host", "hostaddr", "port", "dbname", "sslmode", "target_session_attrs", "connect_timeout")


class TableError(Exception):
    """A table that cannot be read as asked (no key, no such table, rows gone). The message names it."""


def require_psycopg():
    """The psycopg module and its sql module (ImportError saying what to install without them)."""
    try:
        import psycopg
        from psycopg import sql
    except ImportError:
        raise ImportError('reading a Postgres table needs psycopg: pip install "psycopg[binary]"') from None
    return psycopg, sql


def public_address(params: dict) -> dict:
    """The part of a connection's libpq keywords a reader may be told (PUBLIC_KEYWORDS)."""
    return {name: str(params[name]) for name in PUBLIC_KEYWORDS if params.get(name)}


def reader_conninfo(path: str, source: dict | None = None) -> dict:
    """How this process connects to the connection a table slice names (the module docstring's order)."""
    name = formats.connection_name(path)
    own = os.environ.get(ENV_PREFIX + name.upper())
    if own:
        # Shardline's own flag is no libpq parameter.
        parts = urlsplit(own.strip())
        kept = [(k, v) for k, v in parse_qs(parts.query, keep_blank_values=True).items() if k != "allow_own_database"]
        return {"conninfo": parts._replace(query=urlencode([(k, v) for k, vs in kept for v in vs])).geturl()}
    address = (source or {}).get("connection")
    if address:
        return {name: value for name, value in address.items() if name in PUBLIC_KEYWORDS}
    return {"service": name}


def param(path: str, name: str) -> str | None:
    values = parse_qs(urlsplit(path).query, keep_blank_values=True).get(name)
    return values[0] if values else None


def table_name(path: str) -> list[str]:
    """``table=schema.name`` (or ``name``: the search path decides) as identifier parts."""
    value = param(path, "table") or ""
    parts = value.split(".")
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise TableError(f"{formats.redact(path)}: table must be schema.name or name, not {value!r}")
    return parts


def connect(path: str, source: dict | None = None, *, params: dict | None = None, application_name="shardline-reader"):
    """A connection to the database of the connection ``path`` names, named in pg_stat_activity.

    ``params``: libpq keywords to connect with (the server's connection);
    without them, this process's own way (``reader_conninfo``).
    """
    psycopg, _sql = require_psycopg()
    keywords = dict(params) if params is not None else reader_conninfo(path, source)
    keywords.setdefault("application_name", application_name)
    try:
        return psycopg.connect(**keywords, autocommit=False)
    except psycopg.OperationalError as exc:
        raise TableError(
            f"connection {formats.connection_name(path)!r}: cannot connect ({error_summary(exc)})"
        ) from None


def key_columns(connection, path: str) -> list[str]:
    """The columns rows are ordered and sliced by: ``key=a,b`` (a unique index on them), else the primary key."""
    _psycopg_module, sql = require_psycopg()
    table = table_name(path)
    shown = formats.redact(path)
    row = connection.execute("SELECT to_regclass(%s)::oid", [".".join(_quoted(part) for part in table)]).fetchone()
    if row is None or row[0] is None:
        raise TableError(f"{shown}: no table {'.'.join(table)}")
    oid = row[0]
    indexes = connection.execute(
        """SELECT i.indisprimary,
                  array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum)),
                  bool_and(a.attnotnull)
             FROM pg_index AS i
             JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])
            WHERE i.indrelid = %s AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
            GROUP BY i.indexrelid, i.indisprimary""",
        [oid],
    ).fetchall()
    wanted = param(path, "key")
    if wanted:
        columns = [c.strip() for c in wanted.split(",")]
        if not any(cols == columns and not_null for _primary, cols, not_null in indexes):
            raise TableError(
                f"{shown}: key={wanted} is not the columns of a unique index whose columns are NOT NULL; "
                "rows are read in key order by an index range scan, so the key must be unique and indexed"
            )
        return columns
    for primary, columns, _not_null in indexes:
        if primary:
            return columns
    raise TableError(
        f"{shown}: the table has no primary key: its rows have no stable order to slice by; add one, or name a "
        "unique index's NOT NULL columns with key=a,b"
    )


def current_xid(connection) -> int:
    return int(connection.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").fetchone()[0])


def visible(sql):
    """The condition 'the snapshot %(as_of)s sees this row version' (see the module docstring)."""
    return sql.SQL(
        "pg_visible_in_snapshot(((%(now)s::bigint >> 32 << 32) + xmin::text::bigint"
        " - CASE WHEN xmin::text::bigint > (%(now)s::bigint & 4294967295) THEN 4294967296 ELSE 0 END)::text::xid8,"
        " %(as_of)s::pg_snapshot)"
    )


def rows(piece: formats.Slice, source: dict | None = None) -> Iterator[dict]:
    """The rows of a Postgres table slice, as dicts, in key order.

    ``source`` (from the lease): the key columns, the key of the slice's
    first row (``from``, record ``first``) and of the next slice's (``to``);
    without them the reader finds its place by counting rows in key order
    (exact, slower).
    """
    _psycopg_module, sql = require_psycopg()
    as_of = param(piece.path, "as_of")
    if as_of is None or piece.start is None:
        raise TableError(f"{formats.redact(piece.path)}: not a table slice (it needs as_of, start and end)")
    with connect(piece.path, source) as connection:
        connection.read_only = True
        key = (source or {}).get("key") or key_columns(connection, piece.path)
        keys = sql.SQL(", ").join(sql.Identifier(column) for column in key)
        table = sql.SQL(".").join(sql.Identifier(part) for part in table_name(piece.path))
        values = {"as_of": as_of, "now": current_xid(connection), "count": piece.end - piece.start}
        where = [visible(sql)]
        skip = piece.start
        if source and source.get("from") is not None:
            where.append(_compare(sql, keys, ">=", "from", len(key)))
            values.update({f"from{i}": value for i, value in enumerate(source["from"])})
            skip = piece.start - source.get("first", piece.start)
        if source and source.get("to") is not None:
            where.append(_compare(sql, keys, "<", "to", len(key)))
            values.update({f"to{i}": value for i, value in enumerate(source["to"])})
        values["skip"] = skip
        query = sql.SQL("SELECT * FROM {} WHERE {} ORDER BY {} OFFSET %(skip)s LIMIT %(count)s").format(
            table, sql.SQL(" AND ").join(where), keys
        )
        produced = 0
        with connection.cursor(name="shardline_slice") as cursor:  # server-side: streamed, not loaded whole
            cursor.itersize = FETCH
            cursor.execute(query, values)
            names = None
            for record in cursor:
                if names is None:
                    names = [column.name for column in cursor.description]
                produced += 1
                yield dict(zip(names, record))
    if produced < piece.end - piece.start:
        raise TableError(
            f"{formats.redact(piece.path)}: {produced} of the slice's {piece.end - piece.start} rows are left: rows "
            "seen by the snapshot were deleted or updated since (docs/tables.md: read a copy of a table that changes)"
        )


def columns(piece: formats.Slice, source: dict | None = None) -> list[tuple[str, str]]:
    """(name, kind) of the table's columns, kind 'int', 'float' or 'other' (for a tf.data signature)."""
    _psycopg_module, sql = require_psycopg()
    with connect(piece.path, source) as connection:
        table = sql.SQL(".").join(sql.Identifier(part) for part in table_name(piece.path))
        cursor = connection.execute(sql.SQL("SELECT * FROM {} LIMIT 0").format(table))
        kinds = {20: "int", 21: "int", 23: "int", 16: "int", 700: "float", 701: "float"}  # int8/2/4, bool, float4/8
        return [(column.name, kinds.get(column.type_code, "other")) for column in cursor.description]


def _compare(sql, keys, operator: str, name: str, width: int):
    placeholders = sql.SQL(", ").join(sql.Placeholder(f"{name}{i}") for i in range(width))
    return sql.SQL("({}) {} ({})").format(keys, sql.SQL(operator), placeholders)


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def error_summary(exc: Exception) -> str:
    """The first line of a database error, for a reader's own messages (the server never shows it: see server/tables/postgres.py)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
