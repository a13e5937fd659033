"""WorkQueueLoader's receipts with spawned, persistent loader processes: every record of a sliced job once, twice over.

Spawned loaders (the default start method on macOS, and on Linux from
Python 3.14) get the board of worker_sdk.receipts pickled with the dataset,
and persistent ones keep it from one pass of the loop to the next: its
shared memory and its lock come from the DataLoader's context, and each
pass starts with every slot free.
"""

import uuid

import pytest

from .harness import sliced_job, write_files

pytestmark = pytest.mark.timeout(240)

LINES = 90  # per file: 3 slices of 30


def test_spawned_persistent_loaders_read_each_pass_once(sdk_env, celery_worker, tmp_path):
    from tests.tail.reader import read_lines
    from worker_sdk.torch import WorkQueueDataset, WorkQueueLoader

    works = write_files(tmp_path, 2, LINES)
    name = f"spawned-{uuid.uuid4().hex[:6]}"
    queue = sliced_job(works, name, sdk_env["SHARDLINE_RUN"], 6, num_epochs=2)
    loader = WorkQueueLoader(
        WorkQueueDataset(queue, reader=read_lines),
        batch_size=4,  # batches that hold the end of one slice and the start of the next
        num_workers=2,
        multiprocessing_context="spawn",
        persistent_workers=True,
    )
    records = [record for batch in loader for record in batch]
    expected = sorted(line for path in works for line in open(path).read().splitlines())
    # Both epochs in one pass of the loop: each record twice, once an epoch.
    assert sorted(records) == sorted(expected * 2)
    assert queue.watermarks()["state"] == "done"
    assert list(loader) == []  # a second pass of the same loaders: the queue has ended
