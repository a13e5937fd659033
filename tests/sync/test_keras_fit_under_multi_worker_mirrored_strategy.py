"""Two MultiWorkerMirroredStrategy workers fit a Keras model over one WorkQueue: same steps, each record once an epoch.

Real TensorFlow processes (TF_CONFIG, gRPC collectives on the CPU) over a
sliced job, with Keras 2 (tf_keras, TF_USE_LEGACY_KERAS=1: Keras 3's fit
refuses the strategy's distributed dataset: docs/synchronous.md).
An epoch's records are a whole number of global batches, so nothing is left
over and every record must be read once per epoch; a worker's input reads
an epoch's share (steps x its batch) before the next epoch's.
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest

from ..support import ROOT, free_port

WORKER = ROOT / "tests" / "sync" / "mwms_worker.py"
pytestmark = [pytest.mark.tf, pytest.mark.timeout(300)]
EVERYTHING = {f"f{i}-{j}" for i in range(3) for j in range(160)}
QUOTA = 240  # records a worker reads an epoch: 15 steps of 16


def csv_works(folder) -> list[str]:
    works = []
    for i in range(3):
        path = folder / f"part-{i}.csv"
        path.write_text("".join(f"f{i}-{j}\n" for j in range(160)))  # 480 records an epoch: 15 batches of 32
        works.append(str(path))
    return works


def start_workers(sdk_env, cluster, args, out, attempt: int, extra=None):
    children = []
    for index in range(2):
        config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        env = {
            **os.environ,
            **sdk_env,
            "TF_CONFIG": config,
            "PYTHONPATH": str(ROOT),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "TF_USE_LEGACY_KERAS": "1",  # Keras 2: Keras 3's fit fails under this strategy (docs/synchronous.md)
        }
        command = [sys.executable, str(WORKER), *args, *(extra or {}).get(index, [])]
        command += ["--out", str(out / f"worker{index}-{attempt}.txt")]
        children.append(
            subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        )
    return children


def finish(children, timeout=200) -> None:
    try:
        outputs = [child.communicate(timeout=timeout)[0] for child in children]
    finally:
        for child in children:  # a worker whose peer failed waits in a collective: never leave it behind
            if child.poll() is None:
                child.kill()
                child.wait()
    for child, output in zip(children, outputs):
        assert child.returncode == 0, output[-4000:]
        assert "ran out of data" not in output, output[-2000:]


def reads(path) -> tuple[int, list[str]]:
    """The epoch a worker's input started at, and the records it read, in order."""
    lines = path.read_text().splitlines()
    first = next((int(line.split()[1]) for line in lines if line.startswith("first ")), 0)
    return first, [line.split()[1] for line in lines if line.startswith("read ")]


def test_two_workers_run_the_same_steps_and_read_every_record_once_an_epoch(sdk_env, celery_worker, tmp_path):
    cluster = {"worker": [f"localhost:{free_port()}", f"localhost:{free_port()}"]}
    name = f"mwms-{uuid.uuid4().hex[:6]}"
    args = ["--name", name, "--slices", "9", "--epochs", "2", "--batch", "32", *csv_works(tmp_path)]
    # Worker 1 is the slow one: 2 ms a record on top of the reading (0.5 s an epoch).
    finish(start_workers(sdk_env, cluster, args, tmp_path, 0, {1: ["--slow", "0.002"]}))
    read = Counter()
    for index in range(2):
        lines = (tmp_path / f"worker{index}-0.txt").read_text().splitlines()
        assert lines[-1] == "epochs 2 steps 15"  # the same steps on both workers, every epoch
        read.update(line.split()[1] for line in lines if line.startswith("read "))
    assert set(read) == EVERYTHING
    assert set(read.values()) == {2}, (sum(read.values()), Counter(read.values()))


def test_a_worker_killed_mid_epoch_and_both_started_again_resume_with_exactly_the_rest(
    sdk_env, celery_worker, tmp_path
):
    cluster = {"worker": [f"localhost:{free_port()}", f"localhost:{free_port()}"]}
    name = f"mwms-kill-{uuid.uuid4().hex[:6]}"
    args = ["--name", name, "--slices", "9", "--epochs", "3", "--batch", "32", "--backup", str(tmp_path / "backup")]
    args += csv_works(tmp_path)
    # Worker 1 SIGKILLs itself at step 4 of epoch 1; worker 0 is then stuck
    # in a collective, and is stopped as a cluster manager would stop it.
    first_try = start_workers(sdk_env, cluster, args, tmp_path, 0, {1: ["--die-at", "1:4"]})
    try:
        assert first_try[1].wait(timeout=200) == -signal.SIGKILL, first_try[1].communicate()[0][-3000:]
        time.sleep(1)  # worker 0 stuck alone in its collective a while, until the cluster manager stops it
    finally:
        for child in first_try:
            child.kill()
            child.communicate()
    # Both start again, as the cluster manager would: the same TF_CONFIG.
    finish(start_workers(sdk_env, cluster, args, tmp_path, 1))

    per_epoch = {epoch: Counter() for epoch in range(3)}
    for index in range(2):
        first, records = reads(tmp_path / f"worker{index}-0.txt")
        assert first == 0
        per_epoch[0].update(records[:QUOTA])  # epoch 0 ended and was saved; epoch 1 of this try is not
        first, records = reads(tmp_path / f"worker{index}-1.txt")
        assert first == 1  # the input started again at the epoch the kill interrupted
        assert len(records) == 2 * QUOTA
        per_epoch[1].update(records[:QUOTA])
        per_epoch[2].update(records[QUOTA:])
    for epoch, read in per_epoch.items():
        assert set(read) == EVERYTHING, (epoch, len(set(read)))
        assert set(read.values()) == {1}, (epoch, Counter(read.values()))
