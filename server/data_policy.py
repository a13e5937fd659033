"""The data-access policy: what the server itself reads (to expand, count and slice works), as its admin allowed it.

- Files and URL prefixes (and Delta / Iceberg tables, which are files):
  only under ``SHARDLINE_DATA_ROOTS``. Unset, the server reads no file;
  with ``DEBUG`` it reads any (and the slicer logs a warning). A file work
  without ``num_slices`` is handed to workers as it is: the server never
  opens it, so it needs no root.
- Postgres tables: only through a named connection
  (``SHARDLINE_PG_CONNECTION_<NAME>``), with that connection's credentials;
  a work names the connection, never an address (worker_sdk/formats.py).
  A connection that reaches the server's own database is refused unless its
  definition says ``allow_own_database=1``: here by its address, and by the
  slicer by asking the database which it is (server/tables/postgres.py).

``refusals`` is the API's check at job creation; the slicer applies the same
rules again (a job may have been created under another policy).
"""

from __future__ import annotations

from django.conf import settings

from worker_sdk import formats

from . import sources
from .conf import ALLOW_OWN_DATABASE, PG_CONNECTION_PREFIX

# Host names that mean "this machine" to libpq ('' and a socket directory: the
# local Unix socket), for comparing a connection with the server's database.
_LOCAL_HOSTS = {"", "localhost", "127.0.0.1", "::1"}
MAX_LISTED = 5


def file_roots() -> list[str] | None:
    """The roots files must lie under; [] when the server may read none, None when it may read any (DEBUG)."""
    roots = list(settings.SHARDLINE_DATA_ROOTS)
    if roots:
        return roots
    return None if settings.DEBUG else []


def connection(work: str) -> tuple[str, dict]:
    """The named connection a Postgres table work uses: (name, definition); SourceError when it may not be used."""
    name = formats.connection_name(work)
    definition = settings.SHARDLINE_PG_CONNECTIONS.get(name)
    shown = formats.redact(work)
    if definition is None:
        raise sources.SourceError(
            f"{shown}: no Postgres connection named {name!r} is defined (an admin defines one with the setting "
            f"{PG_CONNECTION_PREFIX}{name.upper()}=postgresql://user:password@host:port/database)"
        )
    if not definition.get(ALLOW_OWN_DATABASE) and reaches_own_database(definition["params"]):
        raise sources.SourceError(own_database_refused(shown, name))
    return name, definition


def own_database_refused(shown: str, name: str) -> str:
    return (
        f"{shown}: connection {name!r} reaches the server's own database, which is never a table work unless the "
        "connection's definition allows it (allow_own_database=1 in its URL)"
    )


def reaches_own_database(params: dict) -> bool:
    """Whether libpq keywords name the server's own database by its address (the slicer checks by identity too)."""
    own = settings.DATABASES["default"]
    if (params.get("dbname") or "") != own["NAME"]:
        return False
    ports = [port or "5432" for port in str(params.get("port") or "").split(",")]
    if str(own.get("PORT") or "5432") not in ports:
        return False
    hosts = {_where(host) for host in str(params.get("host") or params.get("hostaddr") or "").split(",")}
    return _where(own.get("HOST") or "") in hosts


def _where(host: str) -> str:
    host = host.strip().lower()
    return "this machine" if host in _LOCAL_HOSTS or host.startswith("/") else host


def refusals(works: list[str], prefix: str | None, num_slices: int | None) -> list[str]:
    """Why the server may not read some of a new job's works (at most MAX_LISTED reasons, each naming its work)."""
    roots = file_roots()
    found = []
    for index, work in enumerate(works):
        full = (prefix or "") + work
        kind = formats.table_kind(full)
        try:
            if kind == formats.POSTGRES:
                connection(full)
                continue
            if kind is not None:
                path = formats.table_location(full)
            elif num_slices:
                path = formats.split_format(full)[0]
            else:
                continue  # handed to workers as is: the server never opens it
            sources.check_roots(path, roots)
        except (sources.SourceError, formats.FormatError) as exc:
            found.append(f"works[{index}]: {exc}")
            if len(found) == MAX_LISTED:
                break
    return found
