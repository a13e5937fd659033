"""Runs consumer.py processes of one shape together over small jobs and checks each round's end.

A round passes when every process ended its consumer normally (no hang, no
error), every record of every file was read exactly once across the
processes, and the job is done with nothing left leased.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
import warnings
from collections import Counter
from pathlib import Path

from tests.support import ROOT

# How many rounds (jobs) each test runs. The closing bar of the end-of-job
# work was SHARDLINE_END_ROUNDS=50; the suite runs a few.
ROUNDS = int(os.environ.get("SHARDLINE_END_ROUNDS", "3"))
SCRIPT = Path(__file__).with_name("consumer.py")


def write_files(folder: Path, count: int, lines: int = 3) -> list[str]:
    paths = []
    for i in range(count):
        path = folder / f"part-{i:02d}.csv"
        path.write_text("".join(f"f{i}-{j}\n" for j in range(lines)))
        paths.append(str(path))
    return paths


def run_consumers(
    env: dict,
    tmp_path: Path,
    shape: str,
    *,
    processes: int,
    files: int,
    queues=("",),
    rounds: int = ROUNDS,
    seconds_per_round: float = 30,
    **options,
) -> None:
    works = write_files(tmp_path, files)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    name = f"end-{shape}-{uuid.uuid4().hex[:6]}"
    flags = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        flags += [flag] if value is True else [flag, str(value)]
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(SCRIPT),
                shape,
                "--me",
                str(me),
                "--parties",
                str(processes),
                "--rounds",
                str(rounds),
                "--barrier",
                str(barrier),
                "--name",
                name,
                "--run",
                env["SHARDLINE_RUN"],
                *flags,
                *works,
            ],
            cwd=ROOT,
            env={**os.environ, **env, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for me in range(processes)
    ]
    outputs = collect(children, 30 + seconds_per_round * rounds, f"{shape}: the consumers")
    for code, stdout, stderr in outputs:
        assert code == 0 and "finished" in stdout, f"a consumer failed (exit {code}):\n{stderr[-3000:]}"

    expected = Counter(
        f"{suffix}{line}"
        for suffix in (f"{q}:" if q else "" for q in queues)
        for path in works
        for line in Path(path).read_text().splitlines()
    )
    for r in range(rounds):
        read = Counter()
        ends = []
        for _code, stdout, _stderr in outputs:
            for line in stdout.splitlines():
                kind, _, rest = line.partition(" ")
                round_no, _, value = rest.partition(" ")
                if kind == "read" and int(round_no) == r:
                    read[value] += 1
                elif kind == "end" and int(round_no) == r:
                    ends.append(value)
        assert ends and set(ends) <= {"exhausted", "out_of_range"}, f"round {r}: {ends}"
        twice = {record: n for record, n in read.items() if n > 1}
        missing = sorted(set(expected) - set(read))
        assert not twice and not missing, f"round {r}: read twice {twice}, never read {missing}"
        assert read == expected
        check_done(env, works, name, queues, r)


def collect(children: list[subprocess.Popen], timeout: float, who: str) -> list[tuple[int, str, str]]:
    """Each child's (exit code, stdout, stderr); children still running after ``timeout`` fail with every stack."""
    outputs = []
    deadline = time.monotonic() + timeout
    try:
        for child in children:
            try:
                stdout, stderr = child.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{who} hung; their stacks:\n{hung_stacks(children)}") from None
            outputs.append((child.returncode, stdout, stderr))
    finally:
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    return outputs


def hung_stacks(children) -> str:
    """Every thread's stack in every process of the hung consumers (consumer.py dumps them on SIGUSR1)."""
    for child in children:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGUSR1)
    time.sleep(2)  # no marker to wait on: the dumps go to the pipes read after the kill; a grace to write them
    report = []
    for child in children:
        try:
            os.killpg(child.pid, signal.SIGKILL)  # its loader processes too
        except ProcessLookupError:
            pass  # it had ended: its output is still read below
        stdout, stderr = child.communicate()
        report.append(f"--- consumer {child.pid}: last output {stdout.splitlines()[-5:]}\n{stderr[-6000:]}")
    return "\n".join(report)


def check_done(env: dict, works: list[str], name: str, queues, round_no: int) -> None:
    from worker_sdk import WorkQueue

    for q in queues:
        queue = WorkQueue(
            works, seed=round_no, name=f"{name}-{q}" if q else name, run=f"{env['SHARDLINE_RUN']}-r{round_no}"
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "the job is already done": what we check
            marks = queue.watermarks()
        assert (marks["state"], marks["leased"], marks["pending"], marks["done"]) == ("done", 0, 0, len(works)), marks


def start_consumer(env: dict, tmp_path: Path, shape: str, name: str, works: list[str], **options) -> subprocess.Popen:
    """One consumer.py process reading one round of job ``name``."""
    barrier = tmp_path / f"barrier-{name}"
    barrier.mkdir()
    flags = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        flags += [flag] if value is True else [flag, str(value)]
    return subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            shape,
            "--me",
            "0",
            "--parties",
            "1",
            "--rounds",
            "1",
            "--barrier",
            str(barrier),
            "--name",
            name,
            "--run",
            env["SHARDLINE_RUN"],
            *flags,
            *works,
        ],
        cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for_line(child: subprocess.Popen, prefix: str, timeout: float) -> list[str]:
    """The consumer's stdout lines up to the first that starts with ``prefix``."""
    lines = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            raise AssertionError(
                f"the consumer ended before printing {prefix!r}: {child.wait()} {child.stderr.read()[-3000:]}"
            )
        lines.append(line.rstrip("\n"))
        if line.startswith(prefix):
            return lines
    raise AssertionError(f"no {prefix!r} within {timeout} s")
