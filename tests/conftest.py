"""Fixtures: in-process API clients per role, and a real gunicorn server.

Every test runs against real Postgres: DATABASE_URL's server when set, the
embedded one otherwise. Tests that talk to a server process use
``live_server_url`` and data committed outside test transactions (the server
cannot see a test's open transaction).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from server.models import Role
from server.services import accounts

from .support import Api, ServerProcess, ServiceTime, database_url

# One Celery queue per test session: server processes and Celery workers
# started by the tests inherit it, so parallel runs never take each other's
# tasks. Unacknowledged tasks of a killed worker come back after 3 s.
os.environ["SHARDLINE_CELERY_QUEUE"] = f"shardline-test-{uuid.uuid4().hex[:8]}"
os.environ.setdefault("SHARDLINE_CELERY_VISIBILITY_TIMEOUT", "3")
# Each web process keeps a database connection per request thread (server/asgi.py);
# with a 4-process server per pytest process and the servers some tests
# start, 8 threads took the machine's Postgres to its 100 connections ("too
# many clients") with two pytest processes, and 4 to 98 with three (the
# session's server now runs 3 processes: live_server_url). 3 are plenty for
# a test's requests (a parked take holds none).
os.environ.setdefault("SHARDLINE_WEB_THREADS", "3")


def start_celery_worker(db_url: str, name: str) -> subprocess.Popen:
    from .support import ROOT

    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "server",
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            "warning",
            "--queues",
            os.environ["SHARDLINE_CELERY_QUEUE"],
            "--hostname",
            f"{name}-{uuid.uuid4().hex[:6]}@%h",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": db_url, "LOG_LEVEL": "WARNING"},
        start_new_session=True,
    )


LIVE_FIXTURES = {"live_server_url", "test_database_url", "live_keys"}
EMBEDDED_WAS_RUNNING = pytest.StashKey[bool]()


def pytest_configure(config):
    # The embedded Postgres (no DATABASE_URL) outlives the process that
    # starts it, as `make run` wants; a test session leaves the machine as it
    # found it. The controlling process notes whether one was running (an
    # xdist worker, or the controller itself, may start it).
    if not hasattr(config, "workerinput") and not os.environ.get("DATABASE_URL"):
        from server import embedded_pg

        config.stash[EMBEDDED_WAS_RUNNING] = embedded_pg.is_running()


def pytest_unconfigure(config):
    if config.stash.get(EMBEDDED_WAS_RUNNING, True) is False:
        from server import embedded_pg

        embedded_pg.stop()


def pytest_collection_modifyitems(items):
    # pytest-django creates the test database only for tests marked django_db;
    # a test that only talks to a server process needs it too. Its own
    # transaction stays empty: everything it checks goes through the server.
    for item in items:
        if LIVE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.django_db)
    # Then every test that talks to a server runs after every other one
    # (pytest-django has sorted those: database tests, transactional ones, the
    # rest). A transactional test empties every table when it ends, the
    # session's committed tokens (live_keys) included, and a database test
    # may count rows that servers commit. A live test that also asks for an
    # in-process database fixture was sorted among the database tests: it
    # made the tokens early, a transactional test then deleted them, and every
    # later live test got 401 (189 failures in one run).
    items[:] = sorted(items, key=lambda item: bool(LIVE_FIXTURES & set(getattr(item, "fixturenames", ()))))


def make_key(username: str, role: str) -> str:
    user, _ = accounts.ensure_user(username, role)
    _token, key = accounts.create_token(user, role)
    return key


@pytest.fixture
def client_for(db):
    """``client_for(role)``: a DRF test client authenticated with a token of that role."""

    def build(role: str | None) -> APIClient:
        client = APIClient()
        if role is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Token {make_key(f'{role}-{uuid.uuid4().hex[:8]}', role)}")
        return client

    return build


@pytest.fixture
def worker_client(client_for) -> APIClient:
    return client_for(Role.WORKER)


@pytest.fixture
def admin_client(client_for) -> APIClient:
    return client_for(Role.ADMIN)


@pytest.fixture
def viewer_client(client_for) -> APIClient:
    return client_for(Role.VIEWER)


@pytest.fixture
def service_time(db, monkeypatch):
    """``service_time.advance(seconds)``: the service's time moved on, in SQL and in Python (support.ServiceTime)."""
    from django.db import connection

    moved = ServiceTime(connection, monkeypatch)
    yield moved
    moved.reset()


@pytest.fixture
def job_name() -> str:
    return f"job-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def test_database_url(django_db_setup) -> str:
    return database_url(settings.DATABASES["default"])


@pytest.fixture(scope="session")
def live_keys(django_db_setup, django_db_blocker) -> dict[str, str]:
    """Committed tokens (one per role) that a server process can see."""
    with django_db_blocker.unblock():
        return {role: make_key(f"live-{role}-{uuid.uuid4().hex[:6]}", role) for role in Role.values}


@pytest.fixture(scope="session")
def live_server_url(test_database_url, live_keys, django_db_blocker):
    # 3 web processes: each holds a connection per request thread, its
    # listener's and its clock's, and three pytest processes share Postgres's 100.
    server = ServerProcess(test_database_url, workers=3).start()
    yield server.url
    server.stop()
    wait_for_other_sessions_to_close(django_db_blocker)


def wait_for_other_sessions_to_close(django_db_blocker) -> None:
    """Lets the test database be dropped: the server's backends end a moment
    after its processes, and a connection that a test opened in another
    context (Playwright runs tests inside its own greenlet) stays idle. Both
    are sessions of this test run on its own test database."""
    from django.db import connection

    with django_db_blocker.unblock():
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        finally:
            connection.close()


@pytest.fixture
def live_api(live_server_url, live_keys):
    """``live_api(role)``: a requests-based client of the running server."""
    return lambda role="worker": Api(live_server_url, live_keys[role] if role else None)


@pytest.fixture(scope="session")
def celery_worker(test_database_url):
    """A real Celery worker process (not eager mode) on this session's queue."""
    worker = start_celery_worker(test_database_url, "test-worker")
    yield worker
    worker.terminate()
    try:
        worker.wait(20)
    except subprocess.TimeoutExpired:
        worker.kill()
