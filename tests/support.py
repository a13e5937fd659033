"""Helpers for tests that run the real server in other processes."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import requests

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url(db: dict) -> str:
    """A DATABASE_URL for Django's DATABASES entry (TCP or Unix socket)."""
    user = quote(db.get("USER") or "")
    password = quote(db.get("PASSWORD") or "")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = db.get("HOST") or ""
    port = db.get("PORT") or ""
    if host.startswith("/"):
        return f"postgres://{auth}/{db['NAME']}?host={quote(host)}" + (f"&port={port}" if port else "")
    return f"postgres://{auth}{host}{':' + port if port else ''}/{db['NAME']}"


def running_database(db: dict) -> dict:
    """Django's DATABASES entry with the server's address: the embedded Postgres's is known only once it runs."""
    if db.get("HOST") or db.get("ENGINE") != "server.embedded_pg":
        return dict(db)
    from server import embedded_pg

    host, port = embedded_pg.ensure_running()
    return {**db, "HOST": host, "PORT": port}


def operator_env(**settings) -> dict:
    """This process's environment as a new operator's: none of the test session's table connections
    (some name the test database itself on purpose, which the server's system check refuses)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDLINE_PG_CONNECTION_")}
    return {**env, **settings}


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02, message="condition"):
    """``predicate()``'s first true value, asked every ``interval`` s; an AssertionError after ``timeout`` s.

    ``message`` says what was awaited; a callable is asked only then (a
    log's text at that moment, say). An assertion in ``predicate`` (a
    process that died meanwhile) fails the wait at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            said = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout:.3g} s waiting for {said}")
        time.sleep(interval)


def arrive_and_wait(folder: Path, me: str, parties: int, timeout: float = 60.0) -> None:
    """A barrier of processes through a folder: each leaves a file named ``me``, then waits for ``parties`` files."""
    (folder / me).touch()
    wait_until(lambda: sum(1 for _ in folder.iterdir()) >= parties, timeout, 0.01, f"{parties} processes in {folder}")


class ServerProcess:
    """gunicorn serving the project against a given database, on a free port."""

    def __init__(
        self, db_url: str, workers: int = 4, extra_env: dict | None = None, asgi: bool = True, app: str | None = None
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DATABASE_URL": db_url,
            "DJANGO_SETTINGS_MODULE": "server.settings",
            "LOG_LEVEL": "WARNING",
            **(extra_env or {}),
        }
        self.workers = workers
        self.asgi = asgi
        self.app = app or ("server.asgi" if asgi else "server.wsgi")  # the module gunicorn serves
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> "ServerProcess":
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "--config",
                "python:server.gunicorn_conf",
                self.app,
                *(["--worker-class", "uvicorn_worker.UvicornWorker"] if self.asgi else []),
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(self.workers),
                "--graceful-timeout",
                "2",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
        )

        def healthy():
            if self.process.poll() is not None:
                raise AssertionError(f"gunicorn exited with {self.process.returncode}")
            try:
                return requests.get(self.url + "/healthz", timeout=5).status_code == 200
            except requests.RequestException:
                return False

        try:
            wait_until(healthy, timeout, 0.1, "the server to answer /healthz")
        except BaseException:
            self.kill()  # never leave a half-started server behind
            raise
        return self

    def kill(self) -> None:
        """SIGKILL the whole process group: the master and its workers, as a crash would."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


class Api:
    """A thin JSON client for tests: base URL + token."""

    def __init__(self, base: str, key: str | None):
        self.base = base.rstrip("/")
        self.session = requests.Session()
        if key:
            self.session.headers["Authorization"] = f"Token {key}"

    def get(self, path: str, **kwargs):
        return self.session.get(self.base + path, timeout=30, **kwargs)

    def post(self, path: str, json=None, **kwargs):
        return self.session.post(self.base + path, json=json, timeout=30, **kwargs)


def as_text(record: logging.LogRecord) -> str:
    """All a record holds: its message, arguments and fields, and as a handler formats it."""
    return f"{record.getMessage()} {record.args!r} {record.__dict__!r} {logging.Formatter().format(record)}"


class ServiceTime:
    """Moves the service's time forward without sleeping: in the database and in this process, together.

    ``advance(seconds)`` replaces ``shardline_now()`` (server/sql/schema.sql),
    which every statement reads the time of leases, heartbeats and liveness
    from, and ``server.clock.now``, its twin in Python: leases expire,
    workers go quiet, rates age, as they would that much later. In a test's
    transaction the database's part is rolled back with it; ``reset`` puts
    it back for a test that commits (other processes, a live server, see the
    moved time once it is committed).
    """

    SCHEMA = ROOT / "server" / "sql" / "schema.sql"
    ORIGINAL = "    SELECT now()\n"

    def __init__(self, connection, monkeypatch):
        from django.utils import timezone

        from server import clock

        self.connection = connection
        self.shift = 0.0
        monkeypatch.setattr(clock, "now", lambda: timezone.now() + timedelta(seconds=self.shift))

    def advance(self, seconds: float) -> None:
        self.shift += seconds
        self._define(f"    SELECT now() + make_interval(secs => {self.shift!r})\n")

    def reset(self) -> None:
        if self.shift:
            self.shift = 0.0
            self._define(self.ORIGINAL)

    def _define(self, body: str) -> None:
        text = self.SCHEMA.read_text()
        start = text.index("CREATE OR REPLACE FUNCTION shardline_now()")
        definition = text[start : text.index("$$;", start) + 3]
        assert self.ORIGINAL in definition, "schema.sql's shardline_now() changed: update ServiceTime"
        with self.connection.cursor() as cursor:
            cursor.execute(definition.replace(self.ORIGINAL, body))
