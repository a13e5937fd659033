"""The Postgres connections table works name in the tests, defined as an operator would.

Importing this module (at collection, before any server or Celery process
starts; they inherit this process's environment) defines:

    sources       a database of its own beside the test database (created by
                  the ``source_database`` fixture): where the tests' tables live
    itself        the server's own (test) database, by its address: refused
    alias         the server's own database by another spelling of its
                  address (127.1): refused by the slicer, which asks the
                  database which one it is
    trusted_self  the server's own database, with allow_own_database=1
    refused_port, no_such_host, no_such_role
                  connections an admin got wrong: what connecting to them
                  says must stay out of the job (libpq's messages)

The server's own database is the test database pytest-django creates:
``test_`` + the configured name (+ the xdist worker's suffix).
"""

from __future__ import annotations

import os

import psycopg
import pytest
from django.conf import settings

from ..support import database_url, running_database

# The embedded Postgres's address is known once it runs: without it the URLs
# below named libpq's default socket, another server or none (every table
# test failed without DATABASE_URL).
_configured = running_database(settings.DATABASES["default"])
_suffix = f"_{os.environ['PYTEST_XDIST_WORKER']}" if os.environ.get("PYTEST_XDIST_WORKER") else ""
OWN_DATABASE = f"test_{_configured['NAME']}{_suffix}"
SOURCE_DATABASE = f"test_{_configured['NAME']}_sources{_suffix}"


def url_of(name: str, **overrides) -> str:
    """A libpq URL of database ``name`` on the test server (``HOST=``, ``USER=``... to change its other parts)."""
    return database_url({**_configured, "NAME": name, **overrides}).replace("postgres://", "postgresql://", 1)


def _with(url: str, param: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{param}"


CONNECTIONS = {
    "SOURCES": url_of(SOURCE_DATABASE),
    "ITSELF": url_of(OWN_DATABASE),
    "TRUSTED_SELF": _with(url_of(OWN_DATABASE), "allow_own_database=1"),
}
CONNECTIONS.update(
    REFUSED_PORT="postgresql://nobody@127.0.0.1:1/warehouse?connect_timeout=3",
    NO_SUCH_HOST="postgresql://nobody@no-such-host.invalid/warehouse?connect_timeout=3",
    NO_SUCH_ROLE=url_of(SOURCE_DATABASE, USER="no_such_role_4f1d", PASSWORD=""),
)
if _configured.get("HOST") == "127.0.0.1":  # a TCP server: 127.1 is the same address
    CONNECTIONS["ALIAS"] = url_of(OWN_DATABASE, HOST="127.1")
for _name, _url in CONNECTIONS.items():
    os.environ[f"SHARDLINE_PG_CONNECTION_{_name}"] = _url


def reader_environment() -> dict[str, str]:
    """A training worker's environment: its own credentials the libpq way, none of the server's connections."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDLINE_PG_CONNECTION_")}
    if _configured.get("USER"):
        env["PGUSER"] = _configured["USER"]
    if _configured.get("PASSWORD"):
        env["PGPASSWORD"] = _configured["PASSWORD"]
    return env


@pytest.fixture(scope="session")
def source_database(django_db_setup):
    """The ``sources`` connection's database, created for the session; its libpq URL."""

    # A connection for each statement: one held open for the whole session
    # is ended by the chaos tests that terminate the server's connections
    # (AdminShutdown at this fixture's teardown).
    def admin(statement: str) -> None:
        with psycopg.connect(url_of(_configured["NAME"]), autocommit=True) as connection:
            connection.execute(statement)

    admin(f'DROP DATABASE IF EXISTS "{SOURCE_DATABASE}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{SOURCE_DATABASE}"')
    yield url_of(SOURCE_DATABASE)
    admin(f'DROP DATABASE IF EXISTS "{SOURCE_DATABASE}" WITH (FORCE)')
