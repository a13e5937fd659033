"""A Keras training run killed mid-epoch resumes from its tf.train.Checkpoint in a new process."""

import pytest

from server.models import Item, ItemHistory, SnapshotRestore

from .crash import reads, run_to_end, run_until, start

pytestmark = pytest.mark.tf

SCRIPT = "tests/snapshots/train_tf2.py"


def test_a_killed_tf2_run_reads_again_exactly_what_followed_its_checkpoint(sdk_env, csv_files, tmp_path, live_api):
    ckpt_dir = str(tmp_path / "ckpt")
    # 4 files x 2 epochs. Checkpoint after 3 items (item 3 still in hand), crash holding item 6.
    first = run_until(
        start([SCRIPT, "--ckpt-dir", ckpt_dir, "--save-after", "3", "--crash-after", "6", *csv_files], sdk_env),
        "crash-point",
    )
    first_reads = reads(first)
    assert len(first_reads) == 6 and "saved" in first

    second = run_to_end(start([SCRIPT, "--ckpt-dir", ckpt_dir, *csv_files], sdk_env))
    assert "restored" in second and "finished" in second
    # The seeded order is the same in both runs: the restart reads from the
    # item that was in hand at the checkpoint (3rd) to the end of epoch 1.
    second_reads = reads(second)
    assert second_reads[:4] == first_reads[2:6]
    assert len(second_reads) == 8 - 2

    job = live_api().get("/api/v1/jobs/", params={"state": "done"}).json()
    (job,) = [j for j in job["results"] if j["name"] == f"resume_tf2.{sdk_env['SHARDLINE_RUN']}"]
    items = Item.objects.filter(job_id=job["id"])
    assert items.count() == 8 and set(items.values_list("state", flat=True)) == {"done"}
    for epoch in (0, 1):
        assert items.filter(epoch=epoch).count() == 4
    (restore,) = SnapshotRestore.objects.filter(job_id=job["id"])
    # After the snapshot: the item in hand at the save, the two it finished
    # next, the item in hand at the crash, and the one leased ahead of it
    # (WorkQueue's look_ahead) if that take reached the server before the
    # kill. A finished one is re-opened, unless the kill stopped the take
    # ahead that carried its completion (the last one's, at most): then it
    # is fenced, as is the item in hand.
    assert 2 <= restore.reopened <= 3 and restore.reopened + restore.fenced in (4, 5)
    rolled_back = ItemHistory.objects.filter(job_id=job["id"])
    assert rolled_back.count() == restore.reopened + restore.fenced
    some = rolled_back.filter(state="done").first()
    history = live_api().get(f"/api/v1/jobs/{job['id']}/items/{some.item_id}/history/").json()["history"]
    assert [e["kind"] for e in history] == ["completed", "restored", "completed"]
    assert history[0]["worker"] != history[2]["worker"]  # the killed process, then the restarted one
