"""A planned synchronous epoch's first lease is taken while the epoch before it is read, and given back if unused.

Without loader processes, SyncLoader opens the next epoch's reading once
this epoch's is under way (sync.OpenedEpoch): its look-ahead takes the next
epoch's first item, of that epoch's own items only, so the next epoch's
first batch waits for no take. When that epoch is planned otherwise after
all (asked again, another epoch set, a restore) or the queue closes, the
item goes back unread, its attempt returned.
"""

import collections
import threading

import psycopg
import pytest

from worker_sdk import WorkQueue
from worker_sdk.client import Client
from worker_sdk.torch import QueueState, SyncLoader

from ..support import wait_until

pytestmark = pytest.mark.timeout(90)

BATCH = 7  # 60 records an epoch: 8 steps (4 left over), then 9 (1 left), then 8


@pytest.fixture
def queue(sdk_env, sliced_60):
    queue = WorkQueue(sliced_60, num_epochs=3, name="opened-epoch", worker="rank0")
    yield queue
    queue.close()


@pytest.fixture
def takes(monkeypatch):
    """Each take's leases as (the epoch the test's loop was in when the take was sent, its from_epoch, lease).

    ``opened[e]`` is set once a take of epoch ``e``'s own items leased one.
    """
    seen = {"now": None, "leases": [], "opened": {epoch: threading.Event() for epoch in range(4)}}
    take = Client.take

    def recorded(self, job_id, body):
        now, scope = seen["now"], body.scope
        answer = take(self, job_id, body)
        seen["leases"] += [(now, scope.from_epoch, lease) for lease in answer.leases]
        if answer.leases and scope.from_epoch is not None:
            seen["opened"][scope.from_epoch].set()
        return answer

    monkeypatch.setattr(Client, "take", recorded)
    return seen


def step_until_opened(step, takes, epoch):
    """The first step lasts until ``epoch``'s first item is leased (the test's epochs last a few ms, a real one's longer)."""
    if step == 0:
        assert takes["opened"][epoch].wait(10)


def held(url, queue):
    """The job's leased items as (epoch, attempts)."""
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute(
            "SELECT epoch, attempts FROM shardline_item WHERE job_id = %s AND state = 'leased' ORDER BY epoch",
            (queue.job["id"],),
        ).fetchall()


def test_each_epochs_first_item_was_leased_while_the_epoch_before_was_read(queue, takes, test_database_url):
    first = {}

    def reader(item):
        first.setdefault(takes["now"], item)
        from worker_sdk import readers

        yield from readers.records(item)

    loader = SyncLoader(queue, batch_size=BATCH, reader=reader)
    read = collections.Counter()
    for epoch in range(3):
        takes["now"] = epoch
        loader.set_epoch(epoch)
        for step, batch in enumerate(loader):
            read.update(batch)
            if epoch < 2:
                step_until_opened(step, takes, epoch + 1)
        # Opened as this epoch's reading began: the next one's (none past the job's last epoch).
        assert (loader.opened.plan.epoch if loader.opened else None) == (epoch + 1 if epoch < 2 else None)
    for epoch in (1, 2):
        early = [lease.item for now, from_epoch, lease in takes["leases"] if now == epoch - 1 and from_epoch == epoch]
        assert early == [first[epoch]], f"epoch {epoch}'s first item was not the one leased before it began"
    # Every record of every epoch once, but the 5 left over at the end; nothing
    # held once the last epoch's completions, sent on a thread, are answered.
    assert sum(read.values()) == 175 and max(read.values()) <= 3
    queue.settle()
    assert held(test_database_url, queue) == []


def opened_leases(takes, epoch):
    return [lease for _now, from_epoch, lease in takes["leases"] if from_epoch == epoch]


def test_an_epoch_planned_otherwise_gives_the_opened_item_back_unread(queue, takes, test_database_url):
    loader = SyncLoader(queue, batch_size=BATCH)
    loader.set_epoch(0)
    for step, _batch in enumerate(loader):
        step_until_opened(step, takes, 1)
    loader.set_epoch(2)  # epoch 1 skipped: its plan worked out is not epoch 2's
    assert len(loader) == loader.plan.steps  # asked, once epoch 1's reading was closed (its take awaited)
    assert len(opened_leases(takes, 1)) == 1 and held(test_database_url, queue) == []
    with psycopg.connect(test_database_url, autocommit=True) as connection:
        attempts = connection.execute(
            "SELECT max(attempts) FROM shardline_item WHERE job_id = %s AND epoch = 1", (queue.job["id"],)
        ).fetchone()[0]
    assert attempts == 0  # given back unread: no attempt used


def test_a_restore_gives_the_opened_item_back_and_the_epoch_reads_all_it_left(queue):
    loader = SyncLoader(queue, batch_size=BATCH)
    read = collections.Counter()
    for batch in loader:
        read.update(batch)
    saved = QueueState(queue, loader).state_dict()  # taken while epoch 1's first item is held
    QueueState(queue, loader).load_state_dict(saved)
    assert loader.opened is None
    assert sum(1 for _batch in loader) == 9  # epoch 1: the 4 left over and its own 60, all there


def test_a_queue_closed_between_epochs_gives_the_opened_item_back(queue, takes, test_database_url):
    loader = SyncLoader(queue, batch_size=BATCH)
    for step, _batch in enumerate(loader):
        step_until_opened(step, takes, 1)
    queue.close()
    assert len(opened_leases(takes, 1)) == 1 and held(test_database_url, queue) == []


def test_a_loader_made_anew_each_epoch_leaves_no_opened_item_held(queue, takes, test_database_url):
    # A script that makes its loader in its epoch loop: the one it drops held
    # the next epoch's first item, which the next loader's count includes.
    for epoch, steps in ((0, 8), (1, 9)):
        loader = SyncLoader(queue, batch_size=BATCH)
        loader.set_epoch(epoch)
        ran = 0
        for ran, _batch in enumerate(loader, 1):
            step_until_opened(ran - 1, takes, epoch + 1)
        assert ran == steps
        del loader
    # Epoch 1's completions go on a thread as its reading ends: answered
    # once settled (a run of the suite looked before they were, 6 held).
    queue.settle()
    assert [row for row in held(test_database_url, queue) if row[0] < 2] == []


def test_an_opened_item_lost_between_epochs_makes_the_next_epoch_ask(sdk_env, sliced_60, takes, test_database_url):
    queue = WorkQueue(sliced_60, num_epochs=3, name="opened-lost", worker="rank0", lease_timeout=3)
    loader = SyncLoader(queue, batch_size=BATCH)
    for step, _batch in enumerate(loader):
        step_until_opened(step, takes, 1)
    assert loader.next_plan is not None
    before = queue.leases_lost()
    # As the server does with an item whose lease expired on its last attempt
    # (say, a heartbeat outage while a checkpoint was written between epochs):
    # its records are out of the count the plan was worked out from.
    with psycopg.connect(test_database_url, autocommit=True) as connection:
        failed = connection.execute(
            "UPDATE shardline_item SET state = 'failed', expires_at = NULL, error = 'lease expired' "
            "WHERE job_id = %s AND state = 'leased' AND epoch = 1 RETURNING id",
            (queue.job["id"],),
        ).fetchall()
    assert len(failed) == 1
    wait_until(lambda: queue.leases_lost() > before, message="the heartbeat hears the lease is lost")
    unread = queue.epoch_records(1)["unread"]
    assert unread == 64 - 10  # the 4 epoch 0 left and epoch 1's own, less the failed item's 10
    assert sum(1 for _batch in loader) == unread // BATCH  # asked: the server's count, every batch there
    assert loader.plan.unread == unread
    queue.close()
