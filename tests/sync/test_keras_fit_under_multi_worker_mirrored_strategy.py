"""Two MultiWorkerMirroredStrategy workers fit a Keras model over one WorkQueue: same steps, each record once an epoch.

Real TensorFlow processes (TF_CONFIG, gRPC collectives on the CPU) over a
sliced job, with Keras 2 (tf_keras, TF_USE_LEGACY_KERAS=1: Keras 3's fit
refuses the strategy's distributed dataset: README, "Synchronous training"); an epoch's
records are a whole number of global batches, so nothing is left over and
every record must be read once per epoch.
"""

import json
import os
import subprocess
import sys
import uuid
from collections import Counter

import pytest

from ..support import ROOT, free_port

WORKER = ROOT / "tests" / "sync" / "mwms_worker.py"


@pytest.mark.tf
@pytest.mark.timeout(240)
def test_two_workers_run_the_same_steps_and_read_every_record_once_an_epoch(sdk_env, celery_worker, tmp_path):
    works = []
    for i in range(3):
        path = tmp_path / f"part-{i}.csv"
        path.write_text("".join(f"f{i}-{j}\n" for j in range(160)))  # 480 records an epoch: 15 batches of 32
        works.append(str(path))
    cluster = {"worker": [f"localhost:{free_port()}", f"localhost:{free_port()}"]}
    name = f"mwms-{uuid.uuid4().hex[:6]}"
    children = []
    for index in range(2):
        config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        out = tmp_path / f"worker{index}.txt"
        args = ["--name", name, "--slices", "9", "--epochs", "2", "--batch", "32", "--out", str(out), *works]
        env = {
            **os.environ,
            **sdk_env,
            "TF_CONFIG": config,
            "PYTHONPATH": str(ROOT),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "TF_USE_LEGACY_KERAS": "1",  # Keras 2: Keras 3's fit fails under this strategy (README)
        }
        children.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), *args],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [child.communicate(timeout=200)[0] for child in children]
    for child, output in zip(children, outputs):
        assert child.returncode == 0, output[-4000:]
        assert "ran out of data" not in output, output[-2000:]
    read = Counter()
    for index in range(2):
        lines = (tmp_path / f"worker{index}.txt").read_text().splitlines()
        assert lines[-1] == "epochs 2 steps 15"  # the same steps on both workers, every epoch
        read.update(line.split()[1] for line in lines if line.startswith("read "))
    assert set(read) == {f"f{i}-{j}" for i in range(3) for j in range(160)}
    assert set(read.values()) == {2}, (sum(read.values()), Counter(read.values()), outputs[0][-3000:])
