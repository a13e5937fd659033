"""Synchronous training through real torchrun: every rank runs each epoch's same number of DDP steps, nothing lost.

Each test starts ``torchrun --standalone`` (gloo, on the CPU) over
tests/sync/ddp_rank.py, whose steps are real DDP steps: ranks that ran
different numbers of steps would hang in the gradients' all-reduce, and the
per-test timeout would name the test. Works are CSV files of known lines
``f<file>-<line>``, so every record trained on can be checked: exactly once
per epoch of the queue, the few records an epoch leaves (fewer than a global
batch, drop_last) read first in the next one.
"""

import uuid
from collections import Counter

import pytest

from .harness import check_epochs, check_every_record_once_an_epoch, epochs_of, torchrun, write_files

pytestmark = pytest.mark.timeout(240)


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
    left = check_epochs(steps, read, [ranks] * epochs, batch, 903)
    check_every_record_once_an_epoch(read, everything, epochs, left)


# A slow rank: the other waits for it in each step's agreement, which runs
# while the step trains (worker_sdk.collectives, Agreement).
@pytest.mark.parametrize("loaders", [0, 2])
def test_works_read_whole_agree_on_each_step_and_give_back_what_was_not_trained(
    loaders, sdk_env, celery_worker, tmp_path
):
    works = write_files(tmp_path, 6, 40)  # six items of 40 records, read whole (no num_slices)
    name = f"ddp-whole-{uuid.uuid4().hex[:6]}"
    args = ["--name", name, "--epochs", "2", "--batch", "8", "--loaders", str(loaders)]
    args += ["--slow-rank", "1", "--slow", "0.01", *works]
    check_whole_items_read(torchrun(sdk_env, 2, args, tmp_path / "reports"), files=6, lines=40)


def test_ranks_that_leave_an_agreed_epoch_together_go_on_with_the_next(sdk_env, celery_worker, tmp_path):
    # Every rank breaks out of epoch 0 at its third batch, the next batch's
    # agreement already started: the ranks' collectives stay in step.
    works = write_files(tmp_path, 6, 40)
    name = f"ddp-leave-{uuid.uuid4().hex[:6]}"
    args = ["--name", name, "--epochs", "2", "--batch", "8", "--leave-at", "0:2", *works]
    stdout = torchrun(sdk_env, 2, args, tmp_path / "reports")
    steps, read = check_whole_items_read(stdout, files=6, lines=40)
    assert steps[0] == [(2, None), (2, None)], steps[0]  # the two batches trained on, each confirmed
    assert sum(read[0].values()) == 2 * 2 * 8
    # Epoch 1 reads what epoch 0 gave back, then its own items.
    assert sum(read[1].values()) > 6 * 40, steps[1]


def check_whole_items_read(stdout: str, files: int, lines: int) -> tuple[dict, dict]:
    """Every epoch the same steps on both ranks; every record trained on; no more read twice than were re-read."""
    steps, read = epochs_of(stdout)
    for epoch in (0, 1):
        assert len(steps[epoch]) == 2 and len({s for s, _d in steps[epoch]}) == 1, steps[epoch]
    total = sum(read.values(), Counter())
    everything = {f"f{i}-{j}" for i in range(files) for j in range(lines)}
    # Whole items: an item a rank was in the middle of when the epoch stopped
    # is given back and read again whole; nothing is lost.
    reread = sum(int(line.split()[7]) for line in stdout.splitlines() if line.startswith("epoch "))
    assert set(total) == everything  # epoch 0's records all trained on, in epoch 0 or first in epoch 1
    assert sum(total.values()) <= 2 * files * lines + reread
    return steps, read
