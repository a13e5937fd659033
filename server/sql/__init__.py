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
"""

import re
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
    names: list[str] = []

    def number(match):
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return _PLACEHOLDER.sub(number, statement(name)), tuple(names)


def run(name: str, params: dict) -> list[tuple]:
    """Executes statement ``name`` and returns its rows (as a prepared statement unless turned off)."""
    from django.conf import settings
    from django.db import connection, utils

    with connection.cursor() as cursor:
        if not settings.SHARDLINE_PREPARED_STATEMENTS:
            cursor.execute(statement(name), params)
            return cursor.fetchall() if cursor.description is not None else []
        text, names = numbered(name)
        prepare = f"PREPARE shardline_{name} AS {text}"
        prepared = connection.connection.__dict__.setdefault("shardline_prepared", set())
        if name not in prepared:
            cursor.execute(prepare)
            prepared.add(name)
        execute = f"EXECUTE shardline_{name} ({', '.join(['%s'] * len(names))})"
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
        return cursor.fetchall() if cursor.description is not None else []
