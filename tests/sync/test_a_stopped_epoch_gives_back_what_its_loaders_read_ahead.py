"""A synchronous epoch that stops early gives back at once what its loader processes (or its own thread) read ahead.

Steps agreed one at a time (works read whole): a loader process leases an
item and hands its records to the rank with the lease, and the DataLoader
prefetches batches ahead of the loop. When the epoch stops, the batches the
rank never received end with the loader processes. Their items stayed leased
until the lease expired, so the epoch that began meanwhile ended without them:
a two-epoch DDP run trained on none of one file's records
(tests/sync/test_ddp_ranks_end_every_epoch_on_the_same_step.py, 1 run in 3 on
a loaded machine). Without loader processes the rank reads two batches
ahead on a thread of its own (worker_sdk.ahead), and gives those back too.
"""

from collections import Counter

import pytest

from worker_sdk import WorkQueue
from worker_sdk.torch import SyncLoader

from .harness import write_files


# Without loader processes, items of 4 records: the two batches read ahead
# (and the one in hand) hold items of their own, beyond the first batch's.
@pytest.mark.parametrize("loaders, files, lines", [(0, 12, 4), (2, 6, 40)])
def test_an_epoch_stopped_after_one_step_holds_no_item_and_the_next_reads_them_all(
    loaders, files, lines, sdk_env, live_api, tmp_path
):
    works = write_files(tmp_path, files, lines)
    # A lease timeout far beyond the test: an item comes back only if it is given back.
    name = f"stopped-epoch-{loaders}"
    queue = WorkQueue(works, num_epochs=2, shuffle=False, name=name, worker="rank0", lease_timeout=600)
    loader = SyncLoader(queue, batch_size=8, num_workers=loaders)
    trained = Counter()
    for batch in loader:
        trained.update(record.decode() for record in batch)
        break  # the epoch stops after one step, its loaders' prefetch unread

    items = f"/api/v1/jobs/{queue.job['id']}/items/"
    leased = live_api("viewer").get(items, params={"state": "leased"}).json()["results"]
    assert leased == [], [(item["epoch"], item["position"], item["worker"]) for item in leased]
    assert loader.stats.steps == 0 and loader.stats.completed == 0  # the step was not confirmed

    loader.set_epoch(1)
    for batch in loader:
        trained.update(record.decode() for record in batch)
    # Epoch 0's items (all given back) first, then epoch 1's: every record
    # twice, the first batch's three times (trained, then read again whole).
    expected = {f"f{i}-{j}": 2 for i in range(files) for j in range(lines)}
    assert set(trained) == set(expected)
    assert sum(trained.values()) == 2 * files * lines + 8
    assert live_api("viewer").get(items, params={"state": "leased"}).json()["results"] == []
