"""The dispatch benchmark runs every arm against the server and take.sql as they are now.

Its raw-SQL arm runs server/sql/take.sql itself, with the parameters the
service binds. When the statement gained two parameters and a column, the
arm failed, and nobody knew until the benchmark was next run
(bench/RESULTS.md, "Dispatch after the end-of-job pace rule"). A short run
of every arm keeps it runnable, and with it the parameters
bench/trigger_ab.py binds (``dispatch.take_params``) and the clients
bench/trust_overhead.py runs.
"""

import os
import subprocess
import sys

import pytest

from .support import ROOT

pytestmark = pytest.mark.timeout(150)

ARMS = {"raw-sql", "http-single", "http-keyed", "http-batch32", "http-half"}


def test_every_arm_of_the_dispatch_bench_takes_and_completes_items(test_database_url):
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env["DATABASE_URL"] = test_database_url  # this session's test database: the bench migrates it (a no-op)
    command = [sys.executable, "bench/dispatch.py", "--seconds", "1", "--items", "2000", "--clients", "2"]
    command += ["--web-workers", "1", "--warm-up", "1"]
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=140)
    assert run.returncode == 0, run.stderr[-4000:]
    # "arm  items/s  round-trips  p50  p99" rows
    rows = {
        line.split()[0]: line.split() for line in run.stdout.splitlines() if line.split()[:1] in ([a] for a in ARMS)
    }
    assert set(rows) == ARMS, run.stdout
    for arm, (_name, items_per_s, round_trips, _p50, _p99) in rows.items():
        assert int(round_trips) > 0 and float(items_per_s) > 0, (arm, run.stdout)
