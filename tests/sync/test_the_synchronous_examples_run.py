"""examples/ddp_train.py (under torchrun) and examples/mwms_keras.py run as the README says, and resume."""

import os
import subprocess
import sys

import pytest

from ..support import ROOT

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def sample(tmp_path):
    """Four CSV files of ``a,b,label`` lines, 250 each: 1,000 records an epoch."""
    paths = []
    for i in range(4):
        path = tmp_path / f"part-{i}.csv"
        path.write_text("".join(f"{i},{j},{(i * 7 + j) % 10}\n" for j in range(250)))
        paths.append(str(path))
    return paths


def run(args, sdk_env, timeout=200):
    env = {**os.environ, **sdk_env, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-4000:])
    return result.stdout


def test_ddp_train_runs_under_torchrun_and_resumes_from_its_checkpoint(sdk_env, celery_worker, sample, tmp_path):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    script = ["examples/ddp_train.py", "--slices", "8", "--loaders", "0", "--checkpoint", str(tmp_path / "ckpt")]
    out = run([*torchrun, *script, "--epochs", "2", *sample], sdk_env)
    # 1,000 records over 2 ranks of 32: 15 steps and 40 left, then (1,000 + 40) // 64 = 16 steps and 16 left.
    assert "epoch 0: 15 steps a rank" in out and "40 records left for the next epoch" in out, out
    assert "epoch 1: 16 steps a rank" in out and "16 records left for the next epoch" in out, out
    # Started again with the same run it resumes after its last saved epoch: nothing left to train.
    again = run([*torchrun, *script, "--epochs", "2", *sample], sdk_env)
    assert "resumed at epoch 2" in again and "epoch " not in again.replace("resumed at epoch", ""), again


@pytest.mark.tf
def test_mwms_keras_starts_its_workers_and_fits_the_same_steps_on_each(sdk_env, celery_worker, sample, tmp_path):
    backup = ["--backup", str(tmp_path / "backup")]
    out = run([sys.executable, "examples/mwms_keras.py", "--workers", "2", "--slices", "8", *backup, *sample], sdk_env)
    assert "3 epochs of 15 steps on every worker from epoch 0" in out, out  # 1,000 // 64
