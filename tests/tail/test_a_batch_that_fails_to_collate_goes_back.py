"""A WorkQueueLoader whose collate_fn raises on one batch, in a loop that goes on: that batch's records are read later, once.

The loop never gets a batch whose collation raised (the DataLoader hands it
the error instead), and a training loop may catch it and read on. Those
records were claimed on the board as the loader collated them; the range
they belong to now stops where the loop is, its later batches on their way
are dropped, and the rest is a new item, which the same process reads.
Before, the records of the failed batch counted as read and were never read.
"""

from collections import Counter

import pytest

from .harness import Lines, check_exactly_once, one_slice_apart, start_reader

pytestmark = pytest.mark.timeout(150)

LINES = 301


def test_the_records_of_a_batch_that_failed_to_collate_are_read_once(sdk_env, celery_worker, tmp_path):
    works, queue, barriers = one_slice_apart(tmp_path, sdk_env, "collate-fails", LINES, "reader")
    reader = Lines(
        start_reader(
            sdk_env, "loader-batches", queue.name, 1, 0.002, "reader", works, barriers[0], 1, collate_fails_on="f0-100"
        )
    )
    assert reader.ended_well(90)
    assert (barriers[0] / "collate-failed").exists(), "the collate_fn never raised"
    check_exactly_once(works, Counter(reader.read))
    job = queue._client.job(queue.job["id"])
    assert job["state"] == "done" and job["splits"] >= 1, job
