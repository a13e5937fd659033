"""A chief and three workers are killed together; all four restore the chief's checkpoint in a new run."""

import os
import signal

import pytest

from server.models import Item, SnapshotRestore

from .crash import reads, run_to_end, run_until, start

pytestmark = pytest.mark.tf

SCRIPT = "tests/snapshots/train_worker.py"
ITEMS = 40


@pytest.mark.parametrize("look_ahead", [0, 1, "auto"])
def test_all_workers_restore_once_and_read_again_exactly_what_followed_the_snapshot(sdk_env, tmp_path, look_ahead):
    # With a look-ahead, take() holds the next item leased when the snapshot
    # is made and when the run dies: it is read again, once, as any other lease.
    ckpt_dir = str(tmp_path / "ckpt")
    base = [SCRIPT, "--ckpt-dir", ckpt_dir, "--items", str(ITEMS), "--look-ahead", str(look_ahead)]
    # The first run starts fresh: its workers look for a checkpoint elsewhere, or one
    # that starts slowly (TensorFlow's import, on a loaded machine) would find the
    # chief's and restore it in the first run too.
    fresh = [SCRIPT, "--ckpt-dir", str(tmp_path / "none-yet"), "--items", str(ITEMS), "--look-ahead", str(look_ahead)]
    # The workers read slower than the chief: at the chief's pace they could
    # finish all 40 items before it, started seconds later (TensorFlow's import
    # on a loaded machine), reached its crash point.
    workers = [start([*fresh, "--cost", "0.5"], {**sdk_env, "SHARDLINE_TASK": f"worker{i}"}) for i in range(3)]
    chief = start(
        [*base, "--cost", "0.1", "--save-after", "3", "--crash-after", "6"], {**sdk_env, "SHARDLINE_TASK": "chief"}
    )
    try:
        run_until(chief, "crash-point", timeout=60)
    finally:
        for process in workers:  # the whole run dies at once
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    # A launcher names the restarted attempt: every worker's restore after the first is a no-op.
    restart_env = {**sdk_env, "SHARDLINE_RESTORE_GENERATION": "attempt-2"}
    processes = [start([*base, "--cost", "0.01"], {**restart_env, "SHARDLINE_TASK": f"task{i}"}) for i in range(4)]
    outputs = [run_to_end(process, timeout=90) for process in processes]
    assert all("restored" in out and "finished" in out for out in outputs)
    second = [item for out in outputs for item in reads(out)]

    job_name = f"resume_workers.{sdk_env['SHARDLINE_RUN']}"
    (restore,) = SnapshotRestore.objects.filter(job__name=job_name)
    items = Item.objects.filter(job__name=job_name)
    assert items.count() == ITEMS and set(items.values_list("state", flat=True)) == {"done"}
    after_snapshot = {item for item, seq in items.values_list("unit_idx", "seq") if seq > restore.snapshot.seq}
    # Read again: exactly the items not done at the snapshot, each once.
    assert sorted(second) == sorted(f"/items/{i:03d}" for i in after_snapshot)
    assert restore.reopened > 0 and restore.fenced > 0
    assert len(second) == restore.reopened + restore.fenced + _never_leased(items, restore)


def _never_leased(items, restore) -> int:
    # Items still pending at the restore (never leased in the first run) are read for the first time.
    from server.models import ItemHistory

    rolled_back = set(ItemHistory.objects.filter(restore=restore).values_list("item_id", flat=True))
    return sum(
        1
        for item_id, seq in items.values_list("id", "seq")
        if seq > restore.snapshot.seq and item_id not in rolled_back
    )
