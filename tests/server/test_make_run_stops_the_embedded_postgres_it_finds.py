"""`make run` (manage.py serve) stops the embedded Postgres on Ctrl-C, also when an earlier command started it."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.support import ROOT

from .embedded_home import environment


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage(home, *args, **kwargs):
    return subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment(home),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        **kwargs,
    )


@pytest.mark.timeout(240)  # a fresh embedded Postgres (initdb) and the web and Celery processes
def test_serve_stops_the_postgres_that_migrate_left_running(home):
    migrate = manage(home, "migrate", "--verbosity", "0")
    output, _ = migrate.communicate(timeout=150)
    assert migrate.returncode == 0, output
    pidfile = home / "pgdata" / "postmaster.pid"
    assert pidfile.exists(), "migrate should have started the embedded Postgres"

    serve = manage(home, "serve", "--port", str(free_port()), "--workers", "1", "--no-sample", start_new_session=True)
    try:
        lines = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = serve.stdout.readline()
            lines.append(line)
            if not line or "Press Ctrl-C" in line:
                break
        assert "Press Ctrl-C" in lines[-1], "".join(lines)
        serve.send_signal(signal.SIGINT)
        rest, _ = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
    assert "stopped the embedded Postgres (started by an earlier command)" in rest, rest
    assert not pidfile.exists()


@pytest.mark.timeout(60)
def test_commands_that_do_not_connect_start_no_postgres(tmp_path):
    # Importing the settings starts nothing: the embedded Postgres is started
    # by the first connection, so these leave no server (and no data folder).
    home = tmp_path / "home"
    for args in (("check",), ("embedded_pg", "status")):
        command = manage(home, *args)
        output, _ = command.communicate(timeout=50)
        assert command.returncode == 0, output
    assert "stopped" in output, output
    assert not (home / "pgdata").exists(), sorted(p.name for p in home.iterdir())
