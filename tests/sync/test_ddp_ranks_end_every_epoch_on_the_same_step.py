"""Synchronous training through real torchrun: every rank runs each epoch's same number of DDP steps, nothing lost.

Each test starts ``torchrun --standalone`` (gloo, on the CPU) over
tests/sync/ddp_rank.py, whose steps are real DDP steps: ranks that ran
different numbers of steps would hang in the gradients' all-reduce, and the
per-test timeout would name the test. Works are CSV files of known lines
``f<file>-<line>``, so every record trained on can be checked: exactly once
per epoch of the queue, the few records an epoch leaves (fewer than a global
batch, drop_last) read first in the next one.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import psutil
import pytest

from ..support import ROOT

RANK = ROOT / "tests" / "sync" / "ddp_rank.py"
pytestmark = pytest.mark.timeout(240)


def write_files(folder, files: int, lines: int) -> list[str]:
    paths = []
    for i in range(files):
        path = folder / f"part-{i}-{uuid.uuid4().hex[:6]}.csv"
        path.write_text("".join(f"f{i}-{j}\n" for j in range(lines)))
        paths.append(str(path))
    return paths


def torchrun(sdk_env, ranks: int, args: list[str], out, max_restarts: int = 0, timeout: float = 100) -> str:
    """Runs the ranks; their reports (every attempt's, rank by rank) as one text."""
    out.mkdir(exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={ranks}",
        f"--max-restarts={max_restarts}",
        "--monitor-interval=0.5",
        str(RANK),
        "--out",
        str(out),
        *args,
    ]
    env = {**os.environ, **sdk_env, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    run = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _stdout, stderr = run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # torchrun starts each rank in a session of its own: signal every descendant.
        family = psutil.Process(run.pid).children(recursive=True)
        for process in family:
            process.send_signal(signal.SIGUSR1)  # every rank and loader dumps its threads' stacks (ddp_rank.py)
        time.sleep(3)
        for process in [psutil.Process(run.pid), *family]:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        _stdout, stderr = run.communicate()
        raise AssertionError(f"the ranks hung; their stacks:\n{stderr[-20000:]}") from None
    assert run.returncode == 0, stderr[-4000:]
    return "".join(path.read_text() for path in sorted(out.iterdir()))


def epochs_of(stdout: str) -> tuple[dict[int, list[tuple[int, int]]], dict[int, Counter]]:
    """Per training epoch: each rank's (steps, dropped) lines, and the records trained in it."""
    steps: dict[int, list[tuple[int, int | None]]] = {}
    read: dict[int, Counter] = {}
    for line in stdout.splitlines():
        parts = line.split()
        if parts[:1] == ["epoch"]:
            dropped = None if parts[5] == "None" else int(parts[5])
            steps.setdefault(int(parts[1]), []).append((int(parts[3]), dropped))
        elif parts[:1] == ["read"]:
            read.setdefault(int(parts[1]), Counter())[parts[2]] += 1
    return steps, read


@pytest.mark.parametrize("ranks, loaders", [(2, 0), (2, 2), (4, 0), (4, 2)])
def test_sliced_works_run_the_same_steps_on_every_rank_and_read_each_record_once(
    ranks, loaders, sdk_env, celery_worker, tmp_path
):
    works = write_files(tmp_path, 3, 301)  # 903 records an epoch
    epochs, batch = 3, 8
    name = f"ddp-{uuid.uuid4().hex[:6]}"
    args = ["--name", name, "--slices", "12", "--epochs", str(epochs), "--batch", str(batch)]
    args += ["--loaders", str(loaders), "--slow-rank", "1", "--slow", "0.01", *works]
    steps, read = epochs_of(torchrun(sdk_env, ranks, args, tmp_path / "reports"))

    everything = {f"f{i}-{j}" for i in range(3) for j in range(301)}
    left = 0
    for epoch in range(epochs):
        counts = steps[epoch]
        assert len(counts) == ranks and len({s for s, _d in counts}) == 1, counts  # every rank, the same steps
        (epoch_steps, dropped), *_ = counts
        # What earlier epochs left is read first, then this epoch's records.
        assert epoch_steps == (903 + left) // (ranks * batch) and dropped == (903 + left) % (ranks * batch)
        assert sum(read[epoch].values()) == epoch_steps * ranks * batch
        twice = {record for record, n in read[epoch].items() if n > 1}
        assert len(twice) <= left, (epoch, sorted(twice)[:20])  # only what the last epoch left is read again
        left = dropped
    total = sum((read[epoch] for epoch in range(epochs)), Counter())
    # Over the run every record was read once per epoch, but for the last epoch's leftover.
    assert set(total) == everything
    assert sum(total.values()) == epochs * 903 - left
    assert all(total[record] in (epochs - 1, epochs) for record in everything)
    assert sum(1 for record in everything if total[record] == epochs - 1) == left


def test_works_read_whole_agree_on_each_step_and_give_back_what_was_not_trained(sdk_env, celery_worker, tmp_path):
    works = write_files(tmp_path, 6, 40)  # six items of 40 records, read whole (no num_slices)
    name = f"ddp-whole-{uuid.uuid4().hex[:6]}"
    args = ["--name", name, "--epochs", "2", "--batch", "8", "--loaders", "2", *works]
    stdout = torchrun(sdk_env, 2, args, tmp_path / "reports")
    steps, read = epochs_of(stdout)
    for epoch in (0, 1):
        assert len(steps[epoch]) == 2 and len({s for s, _d in steps[epoch]}) == 1, steps[epoch]
    total = sum(read.values(), Counter())
    everything = {f"f{i}-{j}" for i in range(6) for j in range(40)}
    # Whole items: an item a rank was in the middle of when the epoch stopped
    # is given back and read again whole; nothing is lost.
    reread = sum(int(line.split()[7]) for line in stdout.splitlines() if line.startswith("epoch "))
    assert set(total) == everything  # epoch 0's records all trained on, in epoch 0 or first in epoch 1
    assert sum(total.values()) <= 2 * 240 + reread
