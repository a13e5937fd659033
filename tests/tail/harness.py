"""Runs reader.py processes over one sliced job and checks that every record was read exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

from tests.ends.harness import collect, hung_stacks
from tests.support import ROOT, wait_until

__all__ = ["collect"]  # the tail tests collect their readers as the end tests do

SCRIPT = Path(__file__).with_name("reader.py")


def write_files(folder: Path, count: int, lines: int) -> list[str]:
    paths = []
    for i in range(count):
        path = folder / f"part-{i:02d}-{uuid.uuid4().hex[:6]}.csv"
        path.write_text("".join(f"f{i}-{j}\n" for j in range(lines)))
        paths.append(str(path))
    return paths


def one_slice_apart(folder: Path, env: dict, prefix: str, lines: int, *readers: str):
    """A job of one file in one slice, and a barrier folder for each reader, each starting alone: (works, queue, barriers)."""
    works = write_files(folder, 1, lines)
    queue = sliced_job(works, f"{prefix}-{uuid.uuid4().hex[:6]}", env["SHARDLINE_RUN"], 1)
    barriers = [folder / f"barrier-{reader}" for reader in readers]
    for barrier in barriers:
        barrier.mkdir()
    return works, queue, barriers


def sliced_job(works: list[str], name: str, run: str, slices: int, **settings):
    """The job the readers will attach to, created and sliced before they start (the test's Celery worker slices it)."""
    from worker_sdk import WorkQueue

    queue = WorkQueue(works, shuffle=False, num_slices=slices, name=name, run=run, **settings)
    job_id = queue.job["id"]
    wait_until(lambda: queue._client.job(job_id)["state"] == "ready", 60, 0.1, "slicing to finish")
    return queue


def start_reader(
    env: dict,
    shape: str,
    name: str,
    slices: int,
    delay: float,
    worker: str,
    works: list[str],
    barrier: Path,
    parties: int,
    die_after: int = 0,
    stop_after: int = 0,
    read_delay: float = 0.0,
    say_produced: bool = False,
    drop_last: bool = False,
    collate_fails_on: str = "",
    iterators: int = 1,
):
    return subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            shape,
            "--name",
            name,
            "--run",
            env["SHARDLINE_RUN"],
            "--slices",
            str(slices),
            "--delay",
            str(delay),
            "--worker",
            worker,
            "--barrier",
            str(barrier),
            "--parties",
            str(parties),
            "--die-after",
            str(die_after),
            "--stop-after",
            str(stop_after),
            "--read-delay",
            str(read_delay),
            *(["--say-produced"] if say_produced else []),
            *(["--drop-last"] if drop_last else []),
            *(["--collate-fails-on", collate_fails_on] if collate_fails_on else []),
            "--iterators",
            str(iterators),
            *works,
        ],
        cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def records_read(stdout: str) -> list[str]:
    return [line[len("read ") :] for line in stdout.splitlines() if line.startswith("read ")]


def check_exactly_once(works: list[str], read: Counter) -> None:
    expected = Counter(line for path in works for line in Path(path).read_text().splitlines())
    twice = {record: n for record, n in read.items() if n > 1}
    missing = sorted(set(expected) - set(read))
    unknown = sorted(set(read) - set(expected))
    assert not twice and not missing and not unknown, (
        f"read twice: {dict(list(twice.items())[:10])} ({len(twice)}); never read: {missing[:10]} ({len(missing)}); "
        f"not in the files: {unknown[:10]}"
    )


class Lines:
    """A reader's stdout, read as it comes (``.read``: the records so far), so a test can act mid-run."""

    def __init__(self, child: subprocess.Popen):
        self.child = child
        self.read: list[str] = []
        self.produced: list[str] = []  # what its readers produced, with --say-produced
        self.finished = False
        self.errors: list[str] = []  # its stderr (read as it comes, so that a full pipe never blocks it)
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()
        self._errors = threading.Thread(target=lambda: self.errors.extend(child.stderr), daemon=True)
        self._errors.start()

    def _follow(self):
        for line in self.child.stdout:
            line = line.rstrip("\n")
            if line.startswith("read "):
                self.read.append(line[len("read ") :])
            elif line.startswith("produced "):
                self.produced.append(line[len("produced ") :])
            elif line == "finished":
                self.finished = True

    def wait(self, timeout: float) -> int:
        """The reader's exit code once it ended (its stacks, and a failure, if it did not within ``timeout``)."""
        try:
            code = self.child.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"a reader hung; its stacks:\n{hung_stacks([self.child])}") from None
        self._thread.join(5)
        self._errors.join(5)
        return code

    def ended_well(self, timeout: float) -> bool:
        """Whether it exited 0; an AssertionError with the end of its stderr if it did not."""
        code = self.wait(timeout)
        assert code == 0, f"a reader exited with {code}:\n{''.join(self.errors[-40:])}"
        return True


def read_together(
    env: dict, folder: Path, shape: str, name: str, slices: int, lines: int, readers: list[tuple[str, float, float]]
):
    """``slices`` files (a slice each) of ``lines`` records, read by reader processes that start together.

    ``readers``: (worker name, the loop's seconds per record, the reader's).
    Checks that each exited cleanly and that every record was read exactly
    once; returns the job, done, and each reader's (stdout, stderr) by its
    worker name.
    """
    works = write_files(folder, slices, lines)
    queue = sliced_job(works, name, env["SHARDLINE_RUN"], slices)
    barrier = folder / "barrier"
    barrier.mkdir()
    children = [
        start_reader(env, shape, name, slices, delay, worker, works, barrier, len(readers), read_delay=read_delay)
        for worker, delay, read_delay in readers
    ]
    outputs = collect(children, 120, "the readers")
    for code, stdout, stderr in outputs:
        assert code == 0 and "finished" in stdout, f"a reader failed (exit {code}):\n{stderr[-3000:]}"
    check_exactly_once(works, Counter(record for _code, stdout, _err in outputs for record in records_read(stdout)))
    job = queue._client.job(queue.job["id"])
    assert job["state"] == "done"
    return job, {worker: (stdout, stderr) for (worker, _, _), (_, stdout, stderr) in zip(readers, outputs)}
