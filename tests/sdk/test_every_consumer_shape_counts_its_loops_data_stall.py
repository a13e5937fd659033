"""Every consumer shape counts its training loop's wait for data, and not its reader's (worker_sdk.stall).

Each loop below reads through a reader 6x slower than its model (READ a
record against COMPUTE): where the SDK reads the records (ranges' records(),
the torch dataset, the loaders, SyncLoader, dataset()), the loop waits about
6/7 of its time. Where the loop reads its item itself (items(), lease()),
the reading is its own work and it hardly waits. Loops in this process are
read off their clock; loops whose loader processes hold the leases are read
off what the server counted from the loaders' heartbeats.
"""

import time
from pathlib import Path

import pytest

from server.models import DataStall
from tests.support import wait_until
from worker_sdk import QueueExhausted, WorkQueue, stall

# 6x, not less: under a loaded machine's CPU the loop's own share of a
# record grows (a TF dataset's loop waited 0.59 of its time at 4x, in a
# run of three pytest processes).
READ = 0.03
COMPUTE = READ / 6


def slow_lines(path: str):
    with open(path) as handle:
        for line in handle:
            time.sleep(READ)  # the reader's work: 6x the model's
            yield line.strip()


def model(_batch) -> None:
    time.sleep(COMPUTE)  # the model's work


def attached(queue: WorkQueue) -> WorkQueue:
    """The queue with its job created: its first take is then a take, not the job's creation (seconds, under load)."""
    assert queue.job["id"]
    return queue


def fraction(queue: WorkQueue, consumer: str) -> float:
    waited, busy = stall.clock(queue.job["id"], consumer).reading()
    assert waited + busy > 0, "nothing was counted"
    return waited / (waited + busy)


@pytest.fixture
def files(tmp_path) -> list[str]:
    paths = []
    for i in range(4):
        path = tmp_path / f"part-{i}.csv"
        path.write_text("".join(f"{i},{j}\n" for j in range(10)))
        paths.append(str(path))
    return paths


def test_ranges_records_count_the_reader_as_the_loops_wait(sdk_env, files):
    queue = attached(WorkQueue(files, name="stall_ranges", worker="ranges-loop"))
    for work in queue.ranges():
        for record in work.records(lambda lease: slow_lines(lease.item)):
            model(record)
    assert fraction(queue, "ranges-loop") > 0.6


def test_a_loop_that_reads_its_items_itself_hardly_waits(sdk_env, files):
    queue = attached(WorkQueue(files, name="stall_items", worker="items-loop"))
    for item in queue.items():
        for record in slow_lines(item):
            model(record)
    assert fraction(queue, "items-loop") < 0.3
    queue = attached(WorkQueue(files, name="stall_lease", worker="lease-loop"))
    while True:
        try:
            with queue.lease() as item:
                for record in slow_lines(item):
                    model(record)
        except QueueExhausted:
            break
    waited, busy = stall.clock(queue.job["id"], "lease-loop").reading()
    assert busy > 4 * 10 * READ and waited / (waited + busy) < 0.3


def test_the_torch_dataset_counts_the_main_process_wait_with_and_without_loader_processes(sdk_env, tmp_path):
    pytest.importorskip("torch", reason="PyTorch is an optional dependency of the SDK tests")
    from torch.utils.data import DataLoader

    from worker_sdk.torch import WorkQueueDataset, WorkQueueLoader

    files = []
    for i in range(4):
        path = tmp_path / f"more-{i}.csv"
        path.write_text("".join(f"{i},{j}\n" for j in range(40)))
        files.append(str(path))

    # The loop's own process reads (num_workers=0): a plain DataLoader will do.
    queue = attached(WorkQueue(files[:1], name="stall_torch0", worker="torch0-loop"))
    for batch in DataLoader(WorkQueueDataset(queue, reader=slow_lines), batch_size=4, num_workers=0):
        model(batch)
    assert fraction(queue, "torch0-loop") > 0.6

    # Two loader processes read (2x the pace of one) and hold the leases:
    # they send the main process's clock, which WorkQueueLoader counts.
    queue = attached(WorkQueue(files, name="stall_torch2", worker="torch2-loop", lease_timeout=2))
    job_id = queue.job["id"]
    for batch in WorkQueueLoader(WorkQueueDataset(queue, reader=slow_lines), batch_size=4, num_workers=2):
        model(batch)
    assert fraction(queue, "torch2-loop") > 0.6
    reported = wait_until(lambda: DataStall.objects.filter(job_id=job_id, worker="torch2-loop").first(), 10, 0.1)
    assert reported.total > 1.0 and reported.waited / reported.total > 0.5, (reported.waited, reported.total)
    assert not DataStall.objects.filter(job_id=job_id, worker__contains=":loader").exists()


def test_sync_loader_counts_the_ranks_wait_for_each_batch(sdk_env, tmp_path):
    pytest.importorskip("torch", reason="PyTorch is an optional dependency of the SDK tests")
    from worker_sdk.torch import SyncLoader

    files = []
    for i in range(4):
        path = tmp_path / f"sync-{i}.csv"
        path.write_text("".join(f"{i},{j}\n" for j in range(40)))
        files.append(str(path))
    for loaders, names in ((0, files[:1]), (2, files)):
        worker = f"sync{loaders}-rank"
        queue = attached(WorkQueue(names, name=f"stall_sync{loaders}", worker=worker, lease_timeout=2))
        for batch in SyncLoader(queue, batch_size=4, reader=slow_lines, num_workers=loaders):
            model(batch)
        # Two loader processes read side by side: the rank waits about 2/3 of
        # its time, not 6/7 (it read 0.59 once on a loaded machine, at 4x).
        assert fraction(queue, worker) > (0.5 if loaders else 0.6), loaders
        job_id = queue.job["id"]
        if loaders:
            reported = wait_until(lambda: DataStall.objects.filter(job_id=job_id, worker=worker).first(), 10, 0.1)
            assert reported.waited / reported.total > 0.5, (reported.waited, reported.total)


def test_a_tensorflow_dataset_counts_the_pipelines_wait_at_its_generator(sdk_env, files):
    pytest.importorskip("tensorflow", reason="TensorFlow is an optional dependency of the SDK tests")

    queue = attached(WorkQueue(files, name="stall_tf", worker="tf-loop"))

    def reader(item, _offset):
        return (line.encode() for line in slow_lines(item))

    for record in queue.dataset(reader=reader, cycle_length=1).as_numpy_iterator():
        model(record)
    assert fraction(queue, "tf-loop") > 0.6

    queue = attached(WorkQueue(files, name="stall_tf_take", worker="tf-take-loop"))
    while True:
        try:
            item = queue.take()
        except Exception as exc:  # tf.errors.OutOfRangeError at the end
            assert "are taken" in str(exc)
            break
        for record in slow_lines(Path(item.numpy().decode())):
            model(record)
    assert fraction(queue, "tf-take-loop") < 0.3
