"""examples/ddp_train.py (under torchrun) and examples/mwms_keras.py run as docs/synchronous.md says, and resume.

The commands are the docs' own (the block marked ``run-by:`` this file), with
this test's files for ``.shardline/sample/*.csv``, its temporary folder for
the rest of ``.shardline/``, a run of its own, and flags that make them quick
(fewer slices and epochs, no loader processes) after the documented ones.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..docs.blocks import blocks_run_by
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


def documented(script: str, sample: list[str], folder: Path) -> tuple[dict[str, str], list[str]]:
    """The docs' command that runs ``script``: its variables, and its words with this test's paths."""
    [block] = blocks_run_by(__file__)
    words = next(words for words in block.commands() if script in words)
    env = {}
    while "=" in words[0]:
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    args = []
    for word in words:
        if word == ".shardline/sample/*.csv":
            args += sample
        elif word.startswith(".shardline/"):
            args.append(str(folder / word.removeprefix(".shardline/")))
        elif word.startswith(".venv/bin/"):
            args.append(str(Path(sys.prefix) / "bin" / word.removeprefix(".venv/bin/")))
        else:
            args.append(word)
    assert "SHARDLINE_RUN" in env, "the docs name the run, so that running it again resumes"
    return env, args


def run(args, sdk_env, timeout=200):
    env = {**os.environ, **sdk_env, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-4000:])
    return result.stdout


def test_ddp_train_runs_under_torchrun_and_resumes_from_its_checkpoint(sdk_env, celery_worker, sample, tmp_path):
    _env, command = documented("examples/ddp_train.py", sample, tmp_path)
    assert Path(command[0]).name == "torchrun" and "--checkpoint" in command, command
    command += ["--slices", "8", "--loaders", "0", "--epochs", "2"]
    out = run(command, sdk_env)
    # 1,000 records over 2 ranks of 32: 15 steps and 40 left, then (1,000 + 40) // 64 = 16 steps and 16 left.
    assert "epoch 0: 15 steps a rank" in out and "40 records left for the next epoch" in out, out
    assert "epoch 1: 16 steps a rank" in out and "16 records left for the next epoch" in out, out
    # Started again with the same run it resumes after its last saved epoch: nothing left to train.
    again = run(command, sdk_env)
    assert "resumed at epoch 2" in again and "epoch " not in again.replace("resumed at epoch", ""), again


@pytest.mark.tf
def test_mwms_keras_starts_its_workers_and_fits_the_same_steps_on_each(sdk_env, celery_worker, sample, tmp_path):
    _env, command = documented("examples/mwms_keras.py", sample, tmp_path)
    assert "--workers" in command and "--backup" in command, command
    out = run([*command, "--slices", "8"], sdk_env)
    assert "3 epochs of 15 steps on every worker from epoch 0" in out, out  # 1,000 // 64
