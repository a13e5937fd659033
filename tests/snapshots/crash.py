"""Run a training script until it reports a line, then SIGKILL it (a crash, no clean-up)."""

import os
import signal
import subprocess
import sys
import threading

from ..support import ROOT


def env_for(env: dict) -> dict:
    return {**os.environ, **env, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def start(args, env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *args],
        env=env_for(env),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def run_until(process: subprocess.Popen, marker: str, timeout: float = 60) -> list[str]:
    """Reads stdout until ``marker``, SIGKILLs the process, and returns the lines before the marker."""
    lines: list[str] = []
    found = threading.Event()

    def read():
        for line in process.stdout:
            line = line.rstrip("\n")
            if line == marker:
                found.set()
                return
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reached = found.wait(timeout)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)
    if not reached:
        raise AssertionError(f"never reached {marker!r}; stdout: {lines}; stderr: {process.stderr.read()[-3000:]}")
    return lines


def run_to_end(process: subprocess.Popen, timeout: float = 90) -> list[str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise AssertionError(f"timed out; stdout: {out[-2000:]}; stderr: {err[-3000:]}") from None
    assert process.returncode == 0, err[-3000:]
    return out.splitlines()


def reads(lines: list[str]) -> list[str]:
    return [line.split(" ", 1)[1] for line in lines if line.startswith("read ")]
