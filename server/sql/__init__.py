"""Named SQL statements of the lease hot path, read once from this folder.

``run(name, params)`` executes one as a prepared statement of the session:
``PREPARE shardline_<name>`` once per database connection, then ``EXECUTE``.
Django sends the SQL text with the values in it, so Postgres would otherwise
parse and plan take.sql, a dozen CTEs, on every request: that was half of a
take's database time (raw-SQL loop, 4 clients on 2 cores: about 520 items/s
planned each time against about 1,000 prepared; bench/RESULTS.md). EXECUTE
rather than psycopg's protocol-level preparation because psycopg re-parses
the placeholders of statements over 4 KB on every call (take.sql is 10 KB:
0.4 ms a take). Django's persistent connections (CONN_MAX_AGE) keep the
statements. SHARDLINE_PREPARED_STATEMENTS=0 turns this off, for a connection
pooler that cannot carry session state (PgBouncer in transaction mode).

Rows come back as named tuples, one class per statement and column list,
built once: ``row.state`` where a caller reads one column, tuple unpacking
where it reads them all. So every column a statement returns has a name.
"""

import re
from collections import namedtuple
from functools import cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


@cache
def statement(name: str) -> str:
    return (_HERE / f"{name}.sql").read_text()


@cache
def numbered(name: str) -> tuple[str, tuple[str, ...]]:
    """The statement with $1..$n for PREPARE, and the parameter names in that order."""
    return number(statement(name))


def number(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` with its %(name)s placeholders as $1..$n, and the names in that order."""
    names: list[str] = []

    def numbered_placeholder(match):
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return _PLACEHOLDER.sub(numbered_placeholder, text), tuple(names)


@cache
def _row_class(name: str, columns: tuple[str, ...]) -> type:
    # Not renamed: a column without a usable name (?column?, a repeated
    # count) fails here, at the first run of its statement.
    return namedtuple(f"{name}_row", columns)


def _rows(name: str, cursor) -> list:
    if cursor.description is None:
        return []
    make = _row_class(name, tuple(column.name for column in cursor.description))._make
    return [make(row) for row in cursor.fetchall()]


def run(name: str, params: dict) -> list[tuple]:
    """Executes statement ``name`` and returns its rows, named (as a prepared statement unless turned off)."""
    from django.conf import settings
    from django.db import connection, utils

    with connection.cursor() as cursor:
        if not settings.SHARDLINE_PREPARED_STATEMENTS:
            cursor.execute(statement(name), params)
            return _rows(name, cursor)
        text, names = numbered(name)
        prepare = f"PREPARE shardline_{name} AS {text}"
        prepared = connection.connection.__dict__.setdefault("shardline_prepared", set())
        if name not in prepared:
            cursor.execute(prepare)
            prepared.add(name)
        execute = f"EXECUTE shardline_{name}" + (f" ({', '.join(['%s'] * len(names))})" if names else "")
        values = [params[key] for key in names]
        try:
            cursor.execute(execute, values)
        except utils.ProgrammingError as exc:
            # Gone from the session (DISCARD ALL by a pooler): prepare it
            # again, once, where a failed statement did not end a transaction.
            if getattr(exc.__cause__, "sqlstate", None) != "26000" or connection.in_atomic_block:
                raise
            cursor.execute(prepare)
            cursor.execute(execute, values)
        return _rows(name, cursor)
