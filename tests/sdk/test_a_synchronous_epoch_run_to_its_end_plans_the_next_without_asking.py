"""A planned synchronous epoch that every rank ran to its end works out the next epoch's plan: no request, no broadcast.

What the epoch left (fewer than one global batch) and the next epoch's own
records are the server's count at the next epoch's start (sync.next_plan),
so SyncLoader asks the server once, for its first epoch, and again only
after a restore or an epoch left early. Each check here compares the plan
worked out with the server's own count, asked at that moment.
"""

import collections
from types import SimpleNamespace

import pytest

from worker_sdk import WorkQueue, sync
from worker_sdk.torch import QueueState, SyncLoader

pytestmark = pytest.mark.timeout(90)

BATCH = 7  # 60 records an epoch: 8 steps (4 left), then 9 (1 left), then 8 (5 left)


@pytest.fixture
def queue(sdk_env, sliced_60):
    queue = WorkQueue(sliced_60, num_epochs=3, name="plan-ahead", worker="rank0")
    yield queue
    queue.close()


@pytest.fixture
def asked(queue):
    """``asked.epochs``: those the loader asked the server to count; ``asked.server(e)``: the test's own look."""
    server = queue.epoch_records
    epochs = []

    def epoch_records(upto_epoch):
        epochs.append(upto_epoch)
        return server(upto_epoch)

    queue.epoch_records = epoch_records
    return SimpleNamespace(epochs=epochs, server=lambda epoch: server(epoch)["unread"])


def run_epoch(loader, epoch, read):
    loader.set_epoch(epoch)  # as a DDP script does every epoch
    for batch in loader:
        read.update(batch)
    return loader.stats.steps


def test_every_epoch_after_the_first_is_planned_as_the_server_would_count_it(queue, asked):
    loader = SyncLoader(queue, batch_size=BATCH)
    read = collections.Counter()
    steps = []
    for epoch in range(3):
        if epoch:
            assert len(loader) == loader.plan.steps  # the plan worked out as the last epoch ended
            queue.settle()  # the last epoch's completions, sent on a thread, answered
            assert loader.plan.epoch == epoch and loader.plan.unread == asked.server(epoch)
        steps.append(run_epoch(loader, epoch, read))
    assert asked.epochs == [0]
    assert steps == [8, 9, 8]
    # Every record of 3 epochs once per epoch, but the 5 the last one left.
    assert sum(read.values()) == 175 and max(read.values()) <= 3
    # Past the job's last epoch, only what the last one left.
    queue.settle()
    assert loader.next_plan.epoch == 3 and loader.next_plan.unread == asked.server(3) == 5
    assert loader.next_plan.steps == 0


def test_a_restore_between_epochs_makes_the_next_one_ask(queue, asked):
    loader = SyncLoader(queue, batch_size=BATCH)
    read = collections.Counter()
    run_epoch(loader, 0, read)
    saved = QueueState(queue, loader).state_dict()
    QueueState(queue, loader).load_state_dict(saved)
    assert loader.next_plan is None and loader.epoch == 1
    assert run_epoch(loader, 1, read) == 9
    assert asked.epochs == [0, 1]


def test_an_epoch_left_early_makes_the_next_one_ask(queue, asked):
    loader = SyncLoader(queue, batch_size=BATCH)
    read = collections.Counter()
    run_epoch(loader, 0, read)
    loader.set_epoch(1)
    for _batch in loader:
        break  # the items it held go back; the next count is the server's
    assert loader.next_plan is None
    loader.set_epoch(2)
    assert len(loader) == loader.plan.steps and asked.epochs == [0, 2]


def test_a_lease_lost_in_an_epoch_makes_the_next_one_ask(queue, asked, test_database_url):
    # Another worker holds the first item the rank started (as after its
    # lease expired): the rank's completion of it is refused, and the item
    # may fail on the way, taking its unread records out of the count.
    import psycopg

    def reader(item):
        if not taken:
            with psycopg.connect(test_database_url, autocommit=True) as connection:
                taken.append(
                    connection.execute(
                        "UPDATE shardline_item SET token = token + 1, worker = 'another' "
                        "WHERE job_id = %s AND state = 'leased' AND worker = 'rank0' RETURNING id",
                        (queue.job["id"],),
                    ).fetchall()
                )
        yield from default(item)

    from worker_sdk import readers

    taken, default = [], readers.records
    loader = SyncLoader(queue, batch_size=BATCH, reader=reader)
    read = collections.Counter()
    run_epoch(loader, 0, read)
    # The epoch's completions go on a thread as its reading ends: the refusal
    # is heard once they are answered, and counts at the ranks' next
    # agreement, here the next epoch's start.
    queue.settle()
    assert taken and taken[0] and queue.leases_lost() >= 1
    # Its records are another worker's, leased: no plan is worked out from a count holding them.
    loader.set_epoch(1)
    assert len(loader) == loader.plan.steps and loader.plan.leased > 0 and asked.epochs == [0, 1]


def test_a_run_restarted_into_a_later_epoch_asks_for_that_epoch(queue, asked):
    # Batches of 6: epoch 0's ten steps lease it out, and its last take makes epoch 1.
    first = SyncLoader(queue, batch_size=6)
    read = collections.Counter()
    run_epoch(first, 0, read)
    first.set_epoch(1)
    for step, _batch in enumerate(first):
        if step == 2:
            break  # a few batches of epoch 1 trained, then a restart without the checkpoint's position
    restarted = SyncLoader(queue, batch_size=6)
    assert run_epoch(restarted, 0, read) == 0  # epoch 0 is done
    # Epoch 1 was made (and read) when epoch 0 was counted: its plan is the server's.
    assert restarted.next_plan is None
    unread = asked.server(1)
    assert 42 <= unread < 60  # what the first run trained of it is done
    assert run_epoch(restarted, 1, read) == unread // 6 and asked.epochs == [0, 0, 1]
    queue.settle()
    assert asked.server(1) == unread % 6


def test_the_plan_worked_out_is_what_was_left_and_the_next_epochs_own():
    plan = sync.EpochPlan(0, 2, 4, unread=30, steps=3, per_epoch=30, leased=0, later_untouched=True)
    following = sync.next_plan(plan, num_epochs=2)
    assert (following.epoch, following.unread, following.steps, following.dropped) == (1, 36, 4, 4)
    last = sync.next_plan(following, num_epochs=2)
    assert (last.epoch, last.unread, last.steps) == (2, 4, 0)
    # Records not known (works read whole): the ranks agree step by step, and nothing is worked out.
    assert sync.next_plan(sync.EpochPlan(0, 2, 4, None, None, None, None, True), num_epochs=2) is None
    # A count that held another worker's leases, or made after a later epoch
    # was (or from a server that does not say): asked again.
    assert sync.next_plan(sync.EpochPlan(0, 2, 4, 30, 3, 30, 5, True), num_epochs=2) is None
    assert sync.next_plan(sync.EpochPlan(0, 2, 4, 30, 3, 30, None, True), num_epochs=2) is None
    assert sync.next_plan(sync.EpochPlan(0, 2, 4, 30, 3, 30, 0, False), num_epochs=2) is None
