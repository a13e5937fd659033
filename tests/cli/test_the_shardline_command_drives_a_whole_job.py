"""The shardline command drives a whole job from a shell script, against the real server (issue 30).

Create from flags, two SDK workers reading, ``watch`` to the end (exit code
by how it ended, as a scheduler reads it), the audit exported as CSV, and
the same for a cancelled job; the config file's profile; errors as one line.
"""

import csv
import json
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

BIN = str(Path(sys.executable).parent)
SCRIPT = r"""
set -u
shardline jobs create --json "$NAME" /w/a /w/b /w/c /w/d /w/e /w/f --run r1 --no-shuffle --lease-timeout 30 > created.json
for worker in 1 2; do
  python -c "
from worker_sdk import WorkQueue
queue = WorkQueue(['/w/a', '/w/b', '/w/c', '/w/d', '/w/e', '/w/f'], shuffle=False, name='$NAME', run='r1', worker='cli-w$worker')
print(*queue.items())
" > worker$worker.out &
done
shardline jobs watch "$NAME.r1" --interval 0.2 > watch.log
echo "$?" > watch.exit
wait
shardline jobs audit "$NAME.r1" -o audit.csv
shardline --json jobs show "$NAME.r1" > shown.json
"""


def run(script: str, cwd: Path, **env) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **env}
    environ.pop("SHARDLINE_RUN", None)
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=environ, capture_output=True, text=True, timeout=90)


def test_a_shell_script_creates_watches_and_audits_a_job(live_server_url, live_keys, tmp_path):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    done = run(SCRIPT, tmp_path, NAME=name, SHARDLINE_URL=live_server_url, SHARDLINE_TOKEN=live_keys["worker"])
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "watch.exit").read_text().strip() == "0"
    created = json.loads((tmp_path / "created.json").read_text())
    assert (created["name"], created["queue"], created["run"]) == (f"{name}.r1", name, "r1")
    assert created["works_count"] == 6
    assert (tmp_path / "watch.log").read_text().splitlines()[-1].startswith(f"{name}.r1 [{'#' * 30}] 100%")
    read = (tmp_path / "worker1.out").read_text().split() + (tmp_path / "worker2.out").read_text().split()
    assert sorted(read) == [f"/w/{c}" for c in "abcdef"]
    with open(tmp_path / "audit.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(row["item"] for row in rows) == sorted(read)
    assert {row["state"] for row in rows} == {"done"} and {row["worker"] for row in rows} <= {"cli-w1", "cli-w2"}
    shown = json.loads((tmp_path / "shown.json").read_text())
    assert shown["state"] == "done" and shown["watermarks"]["done"] == 6


def test_watch_exits_4_when_the_job_is_cancelled(live_server_url, live_keys, tmp_path):
    name = f"cli-cancel-{uuid.uuid4().hex[:8]}"
    script = f"""
    shardline jobs create {name} /w/x > /dev/null
    shardline jobs watch {name} --interval 0.2 > watch.log 2> watch.err &
    shardline --token "$ADMIN" jobs cancel {name}
    wait $!
    echo $? > watch.exit
    """
    done = run(
        script, tmp_path, SHARDLINE_URL=live_server_url, SHARDLINE_TOKEN=live_keys["worker"], ADMIN=live_keys["admin"]
    )
    assert done.returncode == 0, done.stderr
    assert "cancel: job" in done.stdout and "is cancelled" in done.stdout
    assert (tmp_path / "watch.exit").read_text().strip() == "4"
    assert f"job '{name}' was cancelled" in (tmp_path / "watch.err").read_text()


def test_a_saved_profile_serves_when_the_environment_is_silent(live_server_url, live_keys, tmp_path):
    config = tmp_path / "config.ini"
    env = {"SHARDLINE_CONFIG": str(config), "SHARDLINE_URL": "", "SHARDLINE_TOKEN": ""}
    saved = run(
        f"shardline --profile lab config --url {live_server_url} --token {live_keys['viewer']}", tmp_path, **env
    )
    assert saved.returncode == 0 and "saved profile 'lab'" in saved.stdout, saved.stderr
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    listed = run("shardline --profile lab --json jobs list --limit 3", tmp_path, **env)
    assert listed.returncode == 0 and isinstance(json.loads(listed.stdout), list), listed.stderr
    missing = run("shardline jobs list", tmp_path, **env)
    assert missing.returncode == 1 and missing.stderr.startswith("error: no server: pass --url")


@pytest.mark.parametrize(
    "command, message",
    [
        ("jobs show 987654321", "error: no job with id 987654321"),
        ("jobs show no-such-job", "no job named 'no-such-job'"),
        ("--token wrong jobs list", "error: "),
    ],
)
def test_errors_are_one_line_and_a_nonzero_exit(live_server_url, live_keys, tmp_path, command, message):
    done = run(f"shardline {command}", tmp_path, SHARDLINE_URL=live_server_url, SHARDLINE_TOKEN=live_keys["viewer"])
    assert done.returncode in (1, 2) and message in done.stderr and "Traceback" not in done.stderr
