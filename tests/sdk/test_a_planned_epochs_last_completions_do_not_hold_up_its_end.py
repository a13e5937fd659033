"""A planned epoch's last completions go on a thread: the epoch ends at once, and what needs them waits for them.

Without loader processes, SyncLoader's reading of a planned epoch ends once
its quota is read; the completions of its items (one request) go on a
thread, so the step loop's end does not wait for the server. A snapshot
(QueueState), a count the next plan asks for, and the queue's close wait
for them; a refusal among them counts at the ranks' next agreement.
"""

import threading

import psycopg
import pytest

from worker_sdk import WorkQueue
from worker_sdk.client import Client
from worker_sdk.torch import QueueState, SyncLoader

pytestmark = pytest.mark.timeout(90)

BATCH = 7  # 60 records an epoch: 8 steps, 4 left over for the next


@pytest.fixture
def queue(sdk_env, sliced_60):
    queue = WorkQueue(sliced_60, num_epochs=2, name="completions-later", worker="rank0")
    yield queue
    queue.close()


@pytest.fixture
def held_back(monkeypatch):
    """Completions wait, on whatever thread sends them, until ``release`` is set; ``sending`` says one is out."""
    gate = {"sending": threading.Event(), "release": threading.Event(), "threads": []}
    complete_many = Client.complete_many

    def gated(self, completions):
        gate["threads"].append(threading.current_thread())
        gate["sending"].set()
        gate["release"].wait(gate.get("hold", 30))
        return complete_many(self, completions)

    monkeypatch.setattr(Client, "complete_many", gated)
    return gate


def done_in(url, queue, epoch):
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute(
            "SELECT count(*) FROM shardline_item WHERE job_id = %s AND epoch = %s AND state = 'done'",
            (queue.job["id"], epoch),
        ).fetchone()[0]


def test_the_epoch_ends_while_its_completions_are_on_their_way(queue, held_back, test_database_url):
    loader = SyncLoader(queue, batch_size=BATCH)
    assert sum(1 for _batch in loader) == 8  # the loop is over, the completions held back
    assert held_back["sending"].wait(10) and threading.current_thread() not in held_back["threads"]
    # Some may have ridden a take (the next epoch's first); the rest wait.
    assert done_in(test_database_url, queue, 0) < 6
    held_back["release"].set()
    queue.settle()
    assert done_in(test_database_url, queue, 0) == 6  # five slices and the one the quota cut


def test_a_snapshot_after_the_epoch_waits_for_its_completions(queue, held_back):
    loader = SyncLoader(queue, batch_size=BATCH)
    assert sum(1 for _batch in loader) == 8
    saved = []
    snapshot = threading.Thread(target=lambda: saved.append(QueueState(queue, loader).state_dict()))
    snapshot.start()
    snapshot.join(0.5)
    assert snapshot.is_alive()  # waiting for the completions on their way
    held_back["release"].set()
    snapshot.join(30)
    # Restored, the epoch after is the 4 epoch 0 left and its own 60: the
    # snapshot counted epoch 0's items done (had it not, they would be read again).
    QueueState(queue, loader).load_state_dict(saved[0])
    assert sum(1 for _batch in loader) == 64 // BATCH


def test_the_queue_closes_once_the_completions_are_answered(queue, held_back, test_database_url):
    loader = SyncLoader(queue, batch_size=BATCH)
    assert sum(1 for _batch in loader) == 8
    closing = threading.Thread(target=queue.close)
    closing.start()
    closing.join(0.5)
    assert closing.is_alive()
    held_back["release"].set()
    closing.join(30)
    assert done_in(test_database_url, queue, 0) == 6


def test_a_count_asked_after_the_epoch_waits_for_its_completions_however_slow(queue, held_back):
    # Answered only after 6 s (a server retried for a while): a count taken
    # before then would hold the epoch's last items as unread, and the ranks
    # would plan batches nobody can read.
    held_back["hold"] = 6
    loader = SyncLoader(queue, batch_size=BATCH)
    assert sum(1 for _batch in loader) == 8
    anew = SyncLoader(queue, batch_size=BATCH)  # asks: a loader's first epoch
    anew.set_epoch(1)
    assert len(anew) == 64 // BATCH and anew.plan.unread == 64
