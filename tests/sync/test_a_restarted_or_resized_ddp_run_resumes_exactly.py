"""A DDP run resumes from its torch.distributed.checkpoint exactly: after torchrun restarts it, or with more ranks.

ddp_rank.py saves ``QueueState`` (the queue's snapshot and next epoch) with
``torch.distributed.checkpoint`` after every epoch, and loads it when it
starts. Between epochs the snapshot holds exactly what was trained on, so
the reports of the interrupted run's finished epochs and of the resumed run
together must read like one uninterrupted run: the same steps on every rank
of an epoch, every record once an epoch, the leftover of an epoch first in
the next.
"""

import uuid

import pytest

from .harness import check_epochs, check_every_record_once_an_epoch, epochs_of, torchrun, write_files

pytestmark = pytest.mark.timeout(300)

EVERYTHING = {f"f{i}-{j}" for i in range(3) for j in range(301)}


def test_a_rank_killed_mid_epoch_and_restarted_by_torchrun_loses_nothing(sdk_env, celery_worker, tmp_path):
    works = write_files(tmp_path, 3, 301)
    name = f"ddp-restart-{uuid.uuid4().hex[:6]}"
    args = ["--name", name, "--slices", "12", "--epochs", "3", "--batch", "8", "--checkpoint", str(tmp_path / "ckpt")]
    # Rank 1 SIGKILLs itself at step 5 of epoch 1: torchrun stops rank 0 (held
    # in that step's all-reduce) and starts both again, which resume at epoch 1.
    args += ["--die-at", "1:1:5", *works]
    reports = tmp_path / "reports"
    steps, read = epochs_of(torchrun(sdk_env, 2, args, reports, max_restarts=1, timeout=150))

    attempts = sorted(path.name for path in reports.iterdir())
    assert attempts == ["rank0-0.txt", "rank0-1.txt", "rank1-0.txt", "rank1-1.txt"]  # it did restart
    assert (reports / "rank1-0.txt").read_text().startswith("epoch 0 ")  # epoch 0 ended before the kill
    assert "epoch 1 " not in (reports / "rank1-0.txt").read_text()
    left = check_epochs(steps, read, [2, 2, 2], 8, 903)
    check_every_record_once_an_epoch(read, EVERYTHING, 3, left)


def test_a_run_resumed_with_another_number_of_ranks_reads_exactly_the_rest(sdk_env, celery_worker, tmp_path):
    works = write_files(tmp_path, 3, 301)
    name = f"ddp-resize-{uuid.uuid4().hex[:6]}"
    args = ["--name", name, "--slices", "12", "--epochs", "3", "--batch", "8", "--checkpoint", str(tmp_path / "ckpt")]
    text = torchrun(sdk_env, 2, [*args, "--stop-after", "0", *works], tmp_path / "two")  # epoch 0 on 2 ranks
    text += torchrun(sdk_env, 4, [*args, "--loaders", "2", *works], tmp_path / "four")  # then 1 and 2 on 4
    steps, read = epochs_of(text)
    left = check_epochs(steps, read, [2, 4, 4], 8, 903)
    check_every_record_once_an_epoch(read, EVERYTHING, 3, left)
