"""WorkQueue.dataset(): leasing plus reading, several slices at once, each completed when read."""

import threading
from collections import Counter

import pytest

from worker_sdk import WorkQueue, readers

from .data import write_csv, write_tfrecord

pytestmark = pytest.mark.tf


@pytest.fixture
def sliced_queue(sdk_env, celery_worker, tmp_path):
    files = [write_csv(tmp_path / f"p{i}.csv", 100) for i in range(3)] + [write_tfrecord(tmp_path / "r.tfrecord", 60)]
    queue = WorkQueue([str(f) for f in files], num_slices=12, name="interleave")
    from tests.support import wait_until

    wait_until(lambda: queue._client.job(queue.job["id"])["state"] == "ready", 60, 0.1, "slicing")
    expected = Counter(r for f in files for r in readers.records(str(f)))
    return queue, expected


def assert_every_item_done(queue):
    # A slot that finds nothing left to lease asks for a split of a slice
    # still being read (the liquid tail, server/services/splits.py); whether
    # one is still far enough from its end then depends on the schedule. Each
    # split adds one item to the 12 slices.
    job = queue._client.job(queue.job["id"])
    marks = queue.watermarks()
    assert (marks["state"], marks["leased"], marks["pending"], marks["failed"]) == ("done", 0, 0, 0), marks
    assert marks["done"] == 12 + job["splits"], (marks, job)


def test_reading_every_slice_through_the_dataset_yields_the_files_records(sliced_queue):
    queue, expected = sliced_queue
    got = Counter(record.numpy() for record in queue.dataset(cycle_length=3))
    assert got == expected
    assert_every_item_done(queue)


def test_a_slow_slice_does_not_stall_the_others(sliced_queue):
    queue, expected = sliced_queue
    slow_started = threading.Event()
    released = threading.Event()  # set by the consumer once 50 records came from the other slices
    outcome = {}

    def reader(item, offset):
        # The first slice handed out blocks until the consumer has read 50
        # records: only slices read past it can provide them.
        if not slow_started.is_set():
            slow_started.set()
            outcome["released"] = released.wait(timeout=60)
        yield from readers.records(item, offset)

    got = Counter()
    for record in queue.dataset(reader=reader, cycle_length=4):
        got[record.numpy()] += 1
        if sum(got.values()) == 50:
            released.set()
    assert outcome == {"released": True}, "the other slices did not stream past the blocked one"
    assert got == expected
    assert_every_item_done(queue)


def test_a_reader_error_fails_that_item_and_reaches_the_consumer(sliced_queue, live_api):
    import tensorflow as tf

    queue, _expected = sliced_queue

    def broken(item, offset):
        raise OSError(f"cannot read {item}")
        yield  # a generator

    with pytest.raises(tf.errors.OpError, match="cannot read"):
        for _ in queue.dataset(reader=broken, cycle_length=1):
            pass
    failed = live_api("viewer").get(f"/api/v1/jobs/{queue.job['id']}/items/?state=pending").json()["results"]
    assert any("OSError: cannot read" in row["error"] for row in failed)
