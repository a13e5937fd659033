"""Processes that start at once on a machine without DATABASE_URL (``make test``'s pytest-xdist processes, say) all get the embedded database."""

import subprocess
import sys
import time

import pytest

from tests.support import ROOT

from .embedded_home import environment

PROCESSES = 8

# ensure AT: waits for the moment AT, then starts the server and its
# database if they are missing. drop: the server stays, its database and the
# marker of its set-up go, as on the first start of a new home.
SCRIPT = """
import sys, time
import psycopg
from server import embedded_pg
if sys.argv[1] == "ensure":
    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
    embedded_pg.ensure_running()
else:
    socket_dir, port = embedded_pg.ensure_running()
    with psycopg.connect(host=socket_dir, port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{embedded_pg.DATABASE_NAME}"')
    (embedded_pg.data_dir() / ".shardline-database").unlink()
"""


def start(home, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, *args],
        cwd=ROOT,
        env=environment(home),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def finished(process: subprocess.Popen) -> tuple[int, str]:
    output, _ = process.communicate(timeout=120)
    return process.returncode, output


@pytest.mark.timeout(300)  # a fresh embedded Postgres (initdb), then three rounds of 8 processes
def test_processes_that_set_up_the_database_at_one_moment_all_succeed(home):
    assert finished(start(home, "drop")) == (0, "")
    for _ in range(3):
        # Two CREATE DATABASE at one moment fail the later one on the
        # catalog's unique index (a UniqueViolation, not DuplicateDatabase).
        at = time.time() + 3  # past every process's imports
        results = [finished(process) for process in [start(home, "ensure", str(at)) for _ in range(PROCESSES)]]
        failed = [output for code, output in results if code != 0]
        assert not failed, failed[0]
        assert finished(start(home, "drop")) == (0, "")  # DROP DATABASE fails unless it was made
