"""worker_sdk.torch: DataLoader(num_workers=2), each loader process leasing its own items."""

import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is an optional dependency of the SDK tests (pip install torch==2.13.0)"
)


def read_lines(item: str):
    with open(item) as handle:
        for line in handle:
            yield line.strip()


def test_two_loader_workers_read_every_record_once(sdk_env, csv_files, live_api):
    from torch.utils.data import DataLoader

    from worker_sdk import WorkQueue
    from worker_sdk.torch import WorkQueueDataset

    queue = WorkQueue(csv_files, name="torch_loader")
    job_id = queue.job["id"]  # attach before the loaders finish the job
    loader = DataLoader(WorkQueueDataset(queue, reader=read_lines), batch_size=4, num_workers=2)
    records = [record for batch in loader for record in batch]
    expected = sorted(line for path in csv_files for line in open(path).read().splitlines())
    assert sorted(records) == expected
    workers = live_api("viewer").get(f"/api/v1/workers/?job={job_id}").json()["results"]
    assert len([w for w in workers if w["items_done"] > 0 and ":loader" in w["name"]]) >= 1
    assert sum(w["items_done"] for w in workers) == 4
    assert queue.watermarks()["state"] == "done"


def test_without_a_reader_the_dataset_yields_item_strings(sdk_env):
    from torch.utils.data import DataLoader

    from worker_sdk import WorkQueue
    from worker_sdk.torch import WorkQueueDataset

    queue = WorkQueue([f"/t/{i}" for i in range(10)], name="torch_items")
    items = [item for batch in DataLoader(WorkQueueDataset(queue), batch_size=None, num_workers=2) for item in [batch]]
    assert sorted(items) == sorted(f"/t/{i}" for i in range(10))


class _CancelledInTheLoader(torch.utils.data.IterableDataset):
    def __iter__(self):
        from worker_sdk import JobCancelledError

        raise JobCancelledError(409, "job_cancelled", "job 'x' was cancelled by admin at 2026-11-23 11:12:17 UTC")


def test_an_error_raised_in_a_loader_process_keeps_its_class():
    # A DataLoader re-raises a loader's exception as type(text): JobCancelledError
    # must survive that, so a training script can catch it by class.
    from torch.utils.data import DataLoader

    from worker_sdk import JobCancelledError

    with pytest.raises(JobCancelledError, match="was cancelled by admin") as raised:
        list(DataLoader(_CancelledInTheLoader(), batch_size=None, num_workers=1))
    assert raised.value.code == "job_cancelled"


def test_a_loader_that_waits_on_the_server_does_not_hold_up_its_siblings_batches(sdk_env, tmp_path):
    # Item "held" is leased by another worker that keeps it; item "read" has
    # 40 lines. One loader reads "read", the other waits on the server for
    # "held". A DataLoader in order would take one batch from each loader in
    # turn and stop at the waiting one; WorkQueueLoader takes them as they come.
    # (The holder is the loaders' parent: see the next test.)
    import threading
    import time

    from worker_sdk import WorkQueue
    from worker_sdk.torch import WorkQueueDataset, WorkQueueLoader

    held, read = tmp_path / "held.csv", tmp_path / "read.csv"
    held.write_text("held,0\n")
    read.write_text("".join(f"read,{j}\n" for j in range(40)))
    works = [str(held), str(read)]
    holder = WorkQueue(works, shuffle=False, name="torch_waiting_sibling", worker="holder")
    stream = holder.consumers.stream()
    assert stream.next().item == str(held)
    released, lock = {}, threading.Lock()

    def release(by: str) -> None:
        with lock:
            if not released:
                released[by] = time.monotonic()
                stream.finish()

    timer = threading.Timer(30.0, release, args=("the deadline",))
    timer.start()
    try:
        queue = WorkQueue(works, shuffle=False, name="torch_waiting_sibling", worker="trainer")
        queue.job  # noqa: B018  (attached before the loaders start)
        records = []
        for record in WorkQueueLoader(WorkQueueDataset(queue, reader=read_lines), batch_size=None, num_workers=2):
            records.append(record)
            if len(records) == 40:
                release("the loop")  # every line of "read" came while "held" was held
    finally:
        timer.cancel()
        release("the test's end")
    assert sorted(records) == sorted(f"read,{j}" for j in range(40))
    assert "the loop" in released, "the loop waited for the held item before it had the other item's lines"


def test_a_loader_waiting_at_the_end_waits_for_what_its_parent_process_still_reads(sdk_env, tmp_path):
    # This process holds the job's one item and reads on; its DataLoader's
    # loader (a forked copy of it) finds nothing and waits at the end. The
    # loader's wait is its own: were it sent as this process's (through the
    # copy of this process's leaser in the loader), the server would count
    # the item as held by a waiting consumer, and the loader would end while
    # the item can still come back (its reader fails, or dies).
    import threading

    from torch.utils.data import DataLoader

    from server.models import Worker
    from tests.support import wait_until
    from worker_sdk import WorkQueue
    from worker_sdk.torch import WorkQueueDataset

    item = tmp_path / "held.csv"
    item.write_text("held,0\n")
    holder = WorkQueue([str(item)], name="torch_parent_reads", worker="holder")
    stream = holder.consumers.stream()
    assert stream.next().item == str(item)
    queue = WorkQueue([str(item)], name="torch_parent_reads", worker="trainer")
    job_id = queue.job["id"]
    records = []
    loader = DataLoader(WorkQueueDataset(queue, reader=read_lines), batch_size=None, num_workers=1)
    loop = threading.Thread(target=lambda: records.extend(loader), daemon=True)
    loop.start()
    try:
        # The loader asked, found nothing, and marked its process as waiting
        # (with the copied leaser, the parent's lease was sent as waiting
        # then too, and the loader's next take ended its loop within 0.2 s).
        wait_until(
            lambda: (
                not loop.is_alive()
                or Worker.objects.filter(
                    job_id=job_id, name__startswith="trainer:loader", waiting_since__isnull=False
                ).exists()
            ),
            30,
            0.05,
            "the loader waiting at the end",
        )
        loop.join(1.0)  # a loop that ends now ended while the item was held
        assert loop.is_alive(), "the loader ended while this process still held the item"
        assert Worker.objects.get(job_id=job_id, name="holder").waiting_since is None
    finally:
        stream.finish()
    loop.join(30)
    assert not loop.is_alive() and records == []


@pytest.mark.timeout(180)
def test_spawned_loaders_take_in_turn_and_read_every_record_once(sdk_env, tmp_path):
    # Spawned loaders (the default start method on macOS, and on Linux from
    # Python 3.14) get WorkQueueLoader's turns pickled with the dataset: its
    # shared memory and its lock must come from the DataLoader's context.
    from worker_sdk import WorkQueue
    from worker_sdk.torch import WorkQueueDataset, WorkQueueLoader

    works = []
    for index in range(3):
        path = tmp_path / f"part-{index}.csv"
        path.write_text("".join(f"{index},{j}\n" for j in range(20)))
        works.append(str(path))
    queue = WorkQueue(works, shuffle=False, name="torch_spawned_turns", worker="trainer")
    queue.job  # noqa: B018  (attached before the loaders start)
    loader = WorkQueueLoader(
        WorkQueueDataset(queue, reader=read_lines), batch_size=None, num_workers=2, multiprocessing_context="spawn"
    )
    records = list(loader)
    assert sorted(records) == sorted(f"{index},{j}" for index in range(3) for j in range(20))
    assert loader.turns is not None and loader.turns.hunger.closed
    assert queue.watermarks()["state"] == "done"
