"""WorkQueue.dataset(): leasing plus reading, several slices at once, each completed when read."""

import threading
import time
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


def test_reading_every_slice_through_the_dataset_yields_the_files_records(sliced_queue):
    queue, expected = sliced_queue
    got = Counter(record.numpy() for record in queue.dataset(cycle_length=3))
    assert got == expected
    marks = queue.watermarks()
    assert (marks["done"], marks["leased"], marks["state"]) == (12, 0, "done")


def test_a_slow_slice_does_not_stall_the_others(sliced_queue):
    queue, expected = sliced_queue
    slow_started = threading.Event()

    def reader(item, offset):
        # The first slice handed out is slow; the others stream past it.
        if not slow_started.is_set():
            slow_started.set()
            time.sleep(1.5)
        yield from readers.records(item, offset)

    started = time.monotonic()
    first_records = []
    for record in queue.dataset(reader=reader, cycle_length=4):
        if len(first_records) < 50:
            first_records.append(time.monotonic() - started)
    assert first_records[49] < 1.0  # 50 records arrived while the slow slice slept
    assert queue.watermarks()["done"] == 12


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
