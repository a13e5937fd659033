"""A migrated database holds exactly server/sql/schema.sql's functions, views and triggers.

A migration's text is frozen, and schema.sql is the present: they can drift
apart silently (a function changed in the file but not by a migration, or the
other way), and then the statements that call a rule run another one than the
file says. In one transaction that is rolled back, the test reads every
function, view and trigger of the schema as Postgres renders it, drops them,
runs schema.sql, and reads them again: the two readings must be equal, so
the file defines nothing the migrations do not, and the reverse.
"""

import re
from pathlib import Path

import pytest
from django.db import connection, transaction

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "server" / "sql" / "schema.sql"

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(60)]

FUNCTIONS = """
SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
  FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
 WHERE n.nspname = current_schema()
   AND NOT EXISTS (SELECT FROM pg_depend AS d WHERE d.objid = p.oid AND d.deptype = 'e')
"""
VIEWS = """
SELECT c.oid::regclass::text, pg_get_viewdef(c.oid)
  FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
 WHERE n.nspname = current_schema() AND c.relkind IN ('v', 'm')
"""
TRIGGERS = """
SELECT t.tgname || ' ON ' || t.tgrelid::regclass::text, pg_get_triggerdef(t.oid)
  FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace
 WHERE n.nspname = current_schema() AND NOT t.tgisinternal
"""


class RolledBack(Exception):
    pass


def definitions(cursor) -> dict[str, dict[str, str]]:
    found = {}
    for kind, query in (("function", FUNCTIONS), ("view", VIEWS), ("trigger", TRIGGERS)):
        cursor.execute(query)
        found[kind] = dict(cursor.fetchall())
    return found


def test_schema_sql_defines_what_the_migrations_made():
    with connection.cursor() as cursor:
        migrated = definitions(cursor)
        assert "shardline_worker_live(timestamp with time zone,double precision)" in migrated["function"]
        assert migrated["trigger"], "the item trigger is missing: were the migrations run?"
        try:
            with transaction.atomic():
                for view in migrated["view"]:
                    cursor.execute(f"DROP VIEW {view} CASCADE")
                for function in migrated["function"]:
                    cursor.execute(f"DROP FUNCTION IF EXISTS {function} CASCADE")
                assert definitions(cursor) == {"function": {}, "view": {}, "trigger": {}}
                cursor.execute(SCHEMA.read_text())
                from_file = definitions(cursor)
                raise RolledBack
        except RolledBack:
            pass
    for kind in ("function", "view", "trigger"):
        assert sorted(from_file[kind]) == sorted(migrated[kind]), f"{kind}s differ in name"
        for name, text in migrated[kind].items():
            assert from_file[kind][name] == text, f"{kind} {name} differs between the migrations and schema.sql"


def test_schema_sql_names_the_last_migration_that_changed_a_rule():
    # A migration that creates, replaces or drops a function, view or trigger
    # changes what schema.sql must say; its version line must name it.
    changes = re.compile(r"\b(CREATE|DROP)\s+(OR\s+REPLACE\s+)?(FUNCTION|VIEW|TRIGGER)\b")
    numbers = [
        int(path.name[:4])
        for path in sorted((ROOT / "migrations").glob("[0-9][0-9][0-9][0-9]_*.py"))
        if changes.search(path.read_text())
    ]
    version = re.search(r"^-- schema version: (\d+) \(migrations/(\d{4})_", SCHEMA.read_text(), re.MULTILINE)
    assert version, "schema.sql's header has no version line"
    assert int(version.group(1)) == int(version.group(2)) == max(numbers)
