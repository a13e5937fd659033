"""An agreed epoch completes its items on a thread of their own: the training loop does not wait on them.

Steps agreed one at a time (works read whole): the rank completes an item
once it has trained on the item's last record. That request ran on the
training thread, between two steps, where the loop waited for the
server's answer (issue 29: the loop never waits on HTTP in steady state).
"""

import threading
from collections import Counter

import pytest

from worker_sdk import WorkQueue
from worker_sdk.client import Client
from worker_sdk.torch import SyncLoader
from worker_sdk.transport import Transport

from .harness import write_files


class CompletionThreads(Client):
    """The API client, noting the thread each completion is sent from."""

    def __init__(self):
        super().__init__(Transport())  # SHARDLINE_URL and SHARDLINE_TOKEN (sdk_env)
        self.threads: list[threading.Thread] = []

    def complete(self, lease_id, token, records=None):
        self.threads.append(threading.current_thread())
        return super().complete(lease_id, token, records)


@pytest.mark.parametrize("loaders", [0, 2])
def test_items_trained_to_the_end_are_completed_off_the_training_thread(loaders, sdk_env, live_api, tmp_path):
    works = write_files(tmp_path, 6, 20)  # six items of 20 records, read whole (no num_slices)
    client = CompletionThreads()
    queue = WorkQueue(works, shuffle=False, name=f"agreed-off-{loaders}", client=client, lease_timeout=600)
    loader = SyncLoader(queue, batch_size=8, num_workers=loaders)
    trained = Counter()
    for batch in loader:
        trained.update(record.decode() for record in batch)

    assert trained == Counter({f"f{i}-{j}": 1 for i in range(6) for j in range(20)})
    assert loader.stats.completed == 6 and loader.stats.released == 0
    assert len(client.threads) == 6
    assert threading.current_thread() not in client.threads, [thread.name for thread in client.threads]
    items = f"/api/v1/jobs/{queue.job['id']}/items/"
    done = live_api("viewer").get(items, params={"state": "done"}).json()["results"]
    assert len(done) == 6
