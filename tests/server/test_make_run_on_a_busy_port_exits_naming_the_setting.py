"""`make run` on a port another program listens on exits non-zero and says which setting chooses the port.

Found: it printed "Shardline is running at ...", gunicorn logged "Connection
in use" five times, and the command exited 0.
"""

import socket
import subprocess
import sys

from tests.support import ROOT, operator_env


def test_a_busy_port_is_refused_before_anything_starts(test_database_url):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "manage.py", "serve", "--no-sample"],
            cwd=ROOT,
            env=operator_env(DATABASE_URL=test_database_url, SHARDLINE_PORT=str(port)),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0
    assert f"cannot serve on 127.0.0.1:{port}" in done.stderr and "SHARDLINE_PORT=" in done.stderr, done.stderr
    assert "is running" not in done.stdout
