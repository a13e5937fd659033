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
