import os
import subprocess
import sys
import uuid

import pytest

from ..support import ROOT


@pytest.fixture
def sdk_env(live_server_url, live_keys, monkeypatch):
    """SHARDLINE_* for this test (a fresh run id, so each test gets its own jobs)."""
    env = {
        "SHARDLINE_URL": live_server_url,
        "SHARDLINE_TOKEN": live_keys["worker"],
        "SHARDLINE_RUN": uuid.uuid4().hex[:10],
        "SHARDLINE_RETRY_SECONDS": "60",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def sliced_60(tmp_path):
    """60 records in 6 works: three CSV files of 20 lines ``f,j``, each named as two slices of 10."""
    works = []
    for f in range(3):
        path = tmp_path / f"part-{f}.csv"
        path.write_text("".join(f"{f},{j}\n" for j in range(20)))
        works += [f"{path}?start=0&end=10", f"{path}?start=10&end=20"]
    return works


@pytest.fixture
def csv_files(tmp_path):
    """Four small CSV files: file i has lines `i,j,label` for j in 0..9."""
    paths = []
    for i in range(4):
        path = tmp_path / f"part-{i}.csv"
        path.write_text("".join(f"{i},{j},{(i + j) % 3}\n" for j in range(10)))
        paths.append(str(path))
    return paths


def run_python(args, env, timeout=120, **kwargs):
    """Runs a Python script in a fresh interpreter (TF1 graph mode needs one)."""
    full_env = {**os.environ, **env, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], env=full_env, capture_output=True, text=True, timeout=timeout, cwd=ROOT, **kwargs
    )
