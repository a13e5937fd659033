"""The torchrun harness of tests/sync: CSV works of known lines, a torchrun over ddp_rank.py, and what its ranks report."""

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import psutil

from ..support import ROOT

RANK = ROOT / "tests" / "sync" / "ddp_rank.py"


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
    if max_restarts:
        # A restart's ranks could read the previous attempt's addresses from
        # the rendezvous store torchrun shares with them, and fail or hang in
        # init_process_group (pytorch issue 135712): a store of their own.
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    run = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _stdout, stderr = run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # torchrun starts each rank in a session of its own: signal every descendant.
        family = psutil.Process(run.pid).children(recursive=True)
        for process in family:
            # Every rank and loader dumps its threads' stacks (ddp_rank.py), one
            # at a time: dumps written at once into one pipe interleave.
            process.send_signal(signal.SIGUSR1)
            time.sleep(0.3)  # no marker to wait on: the dumps go to the pipe read after the kill
        for process in [psutil.Process(run.pid), *family]:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        _stdout, stderr = run.communicate()
        (out / "stderr.txt").write_text(stderr)  # every process's stacks, beside the ranks' reports
        raise AssertionError(f"the ranks hung; their stacks ({out / 'stderr.txt'}):\n{stderr[-20000:]}") from None
    assert run.returncode == 0, (_stdout[-3000:], stderr[-6000:])
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


def check_epochs(steps, read, ranks_by_epoch: list[int], batch: int, per_epoch: int) -> int:
    """Asserts each epoch's plan held on every rank (the same steps, leftovers first); returns the last leftover."""
    left = 0
    for epoch, ranks in enumerate(ranks_by_epoch):
        counts = steps[epoch]
        assert len(counts) == ranks and len({s for s, _d in counts}) == 1, (epoch, counts)  # the same steps
        (epoch_steps, dropped), *_ = counts
        # What earlier epochs left is read first, then this epoch's records.
        assert epoch_steps == (per_epoch + left) // (ranks * batch), (epoch, epoch_steps)
        assert dropped == (per_epoch + left) % (ranks * batch), (epoch, dropped)
        assert sum(read[epoch].values()) == epoch_steps * ranks * batch
        twice = {record for record, n in read[epoch].items() if n > 1}
        assert len(twice) <= left, (epoch, sorted(twice)[:20])  # only what the last epoch left is read again
        left = dropped
    return left


def check_every_record_once_an_epoch(read, everything: set[str], epochs: int, left: int) -> None:
    """Over the run every record was read once per epoch, but for the last epoch's leftover (``left``)."""
    total = sum((read[epoch] for epoch in range(epochs)), Counter())
    assert set(total) == everything
    assert sum(total.values()) == epochs * len(everything) - left
    assert all(total[record] in (epochs - 1, epochs) for record in everything)
    assert sum(1 for record in everything if total[record] == epochs - 1) == left
