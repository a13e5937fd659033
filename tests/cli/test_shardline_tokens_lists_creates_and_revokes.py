"""``shardline tokens`` from a shell script, against the real server: an admin creates a token (the key alone
on stdout), lists it (a table, or JSON, never the key), the key works, the admin revokes it and it stops;
its own token only with --current; a worker token, bad input and a wrong role are one line and exit 1 or 2."""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

BIN = str(Path(sys.executable).parent)


def run(script: str, cwd: Path, **env) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **env}
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=environ, capture_output=True, text=True, timeout=90)


SCRIPT = r"""
set -eu
KEY=$(shardline tokens create "$WHO" --role worker --name ci --jobs 'cli-tok-*' --expires-in-days 7 2> created.err)
shardline tokens list --user "$WHO" > table.txt
shardline --json tokens list --user "$WHO" > listed.json
ID=$(python -c "import json; print(json.load(open('listed.json'))[0]['id'])")
SHARDLINE_TOKEN="$KEY" shardline --json jobs list > before.json
shardline tokens revoke "$ID" > revoked.txt
if SHARDLINE_TOKEN="$KEY" shardline jobs list 2> after.err; then echo "the revoked key still works"; exit 9; fi
shardline --json tokens list --user "$WHO" --state revoked > after.json
echo "$KEY" > key.txt
"""


def test_an_admin_creates_lists_and_revokes_a_token(live_server_url, live_keys, tmp_path):
    who = f"cli-tok-{uuid.uuid4().hex[:8]}"
    done = run(SCRIPT, tmp_path, WHO=who, SHARDLINE_URL=live_server_url, SHARDLINE_TOKEN=live_keys["admin"])
    assert done.returncode == 0, done.stdout + done.stderr
    key = (tmp_path / "key.txt").read_text().strip()
    assert key.startswith("shl_") and len(key) > 30
    created = (tmp_path / "created.err").read_text()
    assert f"created user '{who}' with role worker" in created and "not shown again" in created and key not in created

    table = (tmp_path / "table.txt").read_text().splitlines()
    assert table[0].split()[:4] == ["ID", "PREFIX", "USER", "ROLE"]
    assert who in table[1] and "cli-tok-*" in table[1] and " live " in table[1] and key[:10] + "…" in table[1]
    (listed,) = json.loads((tmp_path / "listed.json").read_text())
    assert (listed["user"], listed["role"], listed["jobs"], listed["name"]) == (who, "worker", ["cli-tok-*"], "ci")
    assert "key" not in listed and listed["state"] == "live"
    for path in ("table.txt", "listed.json", "revoked.txt", "after.json", "after.err"):
        assert key[10:] not in (tmp_path / path).read_text(), path

    assert isinstance(json.loads((tmp_path / "before.json").read_text()), list)  # the new key worked
    assert (tmp_path / "revoked.txt").read_text().startswith(f"revoked token {listed['id']} ({key[:10]}…) of {who}")
    assert (tmp_path / "after.err").read_text().startswith("error: invalid, expired or revoked token")
    (after,) = json.loads((tmp_path / "after.json").read_text())
    assert after["id"] == listed["id"] and after["state"] == "revoked"


def test_an_admin_revokes_its_own_token_only_with_current(live_server_url, live_keys, tmp_path):
    env = {"SHARDLINE_URL": live_server_url, "SHARDLINE_TOKEN": live_keys["admin"]}
    who = f"cli-self-{uuid.uuid4().hex[:8]}"
    made = run(f"shardline --json tokens create {who} --role admin", tmp_path, **env)
    assert made.returncode == 0, made.stderr
    own = json.loads(made.stdout)
    mine = {**env, "SHARDLINE_TOKEN": own["key"]}
    listed = run(f"shardline tokens list --user {who}", tmp_path, **mine)
    assert "live (this one)" in listed.stdout, listed.stdout
    refused = run(f"shardline tokens revoke {own['id']}", tmp_path, **mine)
    assert refused.returncode == 1 and "--current" in refused.stderr and "Traceback" not in refused.stderr
    assert run("shardline jobs list", tmp_path, **mine).returncode == 0  # still works
    done = run(f"shardline tokens revoke {own['id']} --current", tmp_path, **mine)
    assert done.returncode == 0 and done.stdout.startswith(f"revoked token {own['id']}"), done.stderr
    assert run("shardline jobs list", tmp_path, **mine).returncode == 1


def test_a_worker_token_and_bad_input_are_one_line_errors(live_server_url, live_keys, tmp_path):
    worker = {"SHARDLINE_URL": live_server_url, "SHARDLINE_TOKEN": live_keys["worker"]}
    admin = {**worker, "SHARDLINE_TOKEN": live_keys["admin"]}
    cases = [
        (worker, "tokens list", 1, "error: this action needs the admin role"),
        (worker, "tokens create someone --role admin", 1, "error: this action needs the admin role"),
        (worker, "tokens revoke 1", 1, "error: this action needs the admin role"),
        (admin, "tokens create 'two words' --role worker", 1, "user: use 1-150 characters"),
        (admin, "tokens create someone --role worker --jobs 'a b'", 1, "jobs: "),
        (admin, "tokens create someone --role root", 2, "Invalid value for '--role'"),
        (admin, "tokens create someone", 2, "Missing option '--role'"),
        (admin, "tokens revoke 987654321", 1, "error: no token with id 987654321"),
        (admin, "tokens revoke abc", 2, "Invalid value for 'ID'"),
    ]
    for env, command, code, message in cases:
        done = run(f"shardline {command}", tmp_path, **env)
        assert (done.returncode, message in done.stderr) == (code, True), (command, done.returncode, done.stderr)
        assert "Traceback" not in done.stderr and done.stdout == "", command
