"""Straggler-aware leasing: near the end, a worker much slower than the others gets nothing."""

from datetime import timedelta

import pytest

from server.models import Item, Worker

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


def pace(job_id, name, items_done, busy_seconds, records_done=None):
    # Worker statistics as a run would have left them (set up directly: in a
    # test transaction now() does not move, so real durations would be 0).
    # A work read whole weighs one record.
    Worker.objects.filter(job_id=job_id, name=name).update(
        items_done=items_done,
        busy_seconds=busy_seconds,
        records_done=items_done if records_done is None else records_done,
    )


def one_in_hand_each(client, job_name, items: int, slow_seconds: float):
    """A job of ``items`` items, one in hand for each of two workers at 1 s per item and one at ``slow_seconds``."""
    job = create_job(client, job_name, [f"/d/{i}" for i in range(items)], shuffle=False)
    for name in ("fast-1", "fast-2", "slow"):
        take(client, job["id"], name)
    pace(job["id"], "fast-1", 50, 50.0)
    pace(job["id"], "fast-2", 50, 50.0)
    pace(job["id"], "slow", 10, 10 * slow_seconds)
    return job


@pytest.fixture
def job_near_its_end(worker_client, job_name):
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(6)], shuffle=False)
    for name in ("fast-1", "fast-2", "slow"):
        take(worker_client, job["id"], name, count=1)  # registers the worker, holds one item each
    pace(job["id"], "fast-1", 50, 50.0)  # 1 s per item
    pace(job["id"], "fast-2", 50, 50.0)
    pace(job["id"], "slow", 10, 40.0)  # 4 s per item
    return job


def test_a_much_slower_worker_is_told_to_wait_while_faster_ones_finish(worker_client, job_near_its_end):
    # 3 items left; the fast workers drain them in 1.5 s, the slow one needs 4 s for one.
    result = take(worker_client, job_near_its_end["id"], "slow")
    assert result["leases"] == [] and result["exhausted"] is False and result["retry_after"] == 0.5
    assert len(take(worker_client, job_near_its_end["id"], "fast-1")["leases"]) == 1


def test_a_slow_first_item_acknowledged_with_the_next_take_counts(worker_client, job_near_its_end):
    # The slow worker has finished nothing before; its first item, 40 s long,
    # is acknowledged in the take that asks for the next (WorkQueue.ranges()
    # does so): that take must already see it as slow.
    job_id = job_near_its_end["id"]
    Worker.objects.filter(job_id=job_id, name="slow").update(items_done=0, records_done=0, busy_seconds=0)
    held = Item.objects.get(job_id=job_id, worker="slow", state="leased")
    Item.objects.filter(id=held.id).update(leased_at=held.leased_at - timedelta(seconds=40))
    result = take(worker_client, job_id, "slow", complete=[{"id": held.id, "token": held.token}])
    assert result["completed"] == [held.id]
    assert result["leases"] == [] and result["retry_after"] == 0.5


def test_before_it_finishes_an_item_a_workers_pace_is_how_long_its_consumer_has_held_one(
    worker_client, job_near_its_end
):
    # A DataLoader's loader takes its next range while the loop still trains
    # on the last one's batches (acknowledged only once the loop has them):
    # its take carries no completion. Held 40 s, that range says the
    # consumer is slow, for that loader and for its sibling loader alike.
    job_id = job_near_its_end["id"]
    Worker.objects.filter(job_id=job_id, name="slow").update(items_done=0, records_done=0, busy_seconds=0)
    held = Item.objects.get(job_id=job_id, worker="slow", state="leased")
    Item.objects.filter(id=held.id).update(leased_at=held.leased_at - timedelta(seconds=40))
    assert take(worker_client, job_id, "slow")["retry_after"] == 0.5
    sibling = worker_client.post(
        f"/api/v1/jobs/{job_id}/leases/", {"worker": "slow-loader-2", "consumer": "slow"}, format="json"
    )
    assert sibling.status_code == 200 and sibling.json()["leases"] == [] and sibling.json()["retry_after"] == 0.5
    # Held 1 s, as long as the others' items take: not slow, it may lease.
    Item.objects.filter(id=held.id).update(leased_at=held.leased_at - timedelta(seconds=1))
    assert len(take(worker_client, job_id, "slow")["leases"]) == 1


def test_the_fastest_worker_is_never_deferred(worker_client, job_near_its_end):
    pace(job_near_its_end["id"], "fast-2", 10, 40.0)  # now two slow workers and one fast
    assert len(take(worker_client, job_near_its_end["id"], "fast-1")["leases"]) == 1


def test_workers_of_equal_pace_all_keep_leasing(worker_client, job_near_its_end):
    pace(job_near_its_end["id"], "slow", 50, 50.0)
    for name in ("slow", "fast-1", "fast-2"):
        assert len(take(worker_client, job_near_its_end["id"], name)["leases"]) == 1


def test_with_nothing_pending_a_slow_worker_is_told_what_to_wait_for(worker_client, job_near_its_end):
    # The fast workers take the last three items: nothing is pending, and the
    # slow worker must learn where the job stands (a loader deferred forever
    # here once held its DataLoader, and so its sibling's lease, at the end).
    for name in ("fast-1", "fast-2", "fast-1"):
        take(worker_client, job_near_its_end["id"], name)
    result = take(worker_client, job_near_its_end["id"], "slow")
    assert result["leases"] == [] and result["retry_after"] != 0.5
    assert (result["leased_by_you"], result["waiting_on"]) == (1, 5)


def test_a_loader_is_not_deferred_to_loaders_of_its_own_consumer(worker_client, job_near_its_end):
    # The three are loader processes of one DataLoader (one consumer): the
    # fast ones read only when their main process gets past the slow one.
    Worker.objects.filter(job_id=job_near_its_end["id"]).update(consumer="main")
    response = worker_client.post(
        f"/api/v1/jobs/{job_near_its_end['id']}/leases/", {"worker": "slow", "consumer": "main"}, format="json"
    )
    assert response.status_code == 200 and len(response.json()["leases"]) == 1


def test_a_worker_is_not_deferred_to_fast_workers_that_read_nothing_now(worker_client, job_near_its_end):
    # The fast workers' leases were taken back (they died, or a restore fenced
    # them): however fast they were, they finish nothing, and a worker
    # deferred to them would wait until they no longer count as live.
    Item.objects.filter(job_id=job_near_its_end["id"], worker__startswith="fast").update(state="pending")
    assert len(take(worker_client, job_near_its_end["id"], "slow")["leases"]) == 1


def test_a_take_ahead_counts_the_item_in_hand(worker_client, job_name):
    # A take ahead leases the item after the one its worker reads: it would
    # start it only once that one is done. 9 items left, the fast workers
    # drain them in 4.5 s; the slow one, at 3 s per item, would finish its
    # next in 3 s (it may lease it) but the one after in 6 s (not ahead).
    job = one_in_hand_each(worker_client, job_name, 12, slow_seconds=3.0)
    ahead = worker_client.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "slow", "ahead": True}, format="json")
    assert ahead.status_code == 200 and ahead.json()["leases"] == []
    assert len(take(worker_client, job["id"], "slow")["leases"]) == 1
    fast = worker_client.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "fast-1", "ahead": True}, format="json")
    assert len(fast.json()["leases"]) == 1


def test_near_the_end_a_take_ahead_waits_until_its_workers_pace_is_known(worker_client, job_near_its_end):
    job_id = job_near_its_end["id"]
    take(worker_client, job_id, "new")  # its first item, not finished
    ahead = worker_client.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "new", "ahead": True}, format="json")
    assert ahead.status_code == 200 and ahead.json()["leases"] == []
    assert len(take(worker_client, job_id, "new")["leases"]) == 1  # a take for the loop itself is not held back


def ranges(*sizes):
    return [f"/d/{i}.csv?start=0&end={size}" for i, size in enumerate(sizes)]


@pytest.fixture
def ranged_job_near_its_end(worker_client, job_name):
    # Record ranges, as a sliced job's, after a split cut one into pieces:
    # the slow worker's one finished item was a 3-record piece, read in 0.6 s
    # (0.2 s a record); the fast ones read 150-record ranges in 5 s each
    # (0.033 s a record). Per item, the slow one looked over 8x faster.
    job = create_job(worker_client, job_name, ranges(150, 150, 150, 3, 150, 150), shuffle=False)
    for name in ("fast-1", "fast-2", "slow"):
        take(worker_client, job["id"], name)
    pace(job["id"], "fast-1", 1, 5.0, records_done=150)
    pace(job["id"], "fast-2", 1, 5.0, records_done=150)
    pace(job["id"], "slow", 1, 0.6, records_done=3)
    return job


def test_paces_are_per_record_so_a_fast_worker_is_not_deferred_for_a_slow_ones_small_piece(
    worker_client, ranged_job_near_its_end
):
    # Per item, 5 s against 0.6 s: the fast worker was deferred here, and
    # the pieces cut for it stayed pending while it waited.
    assert len(take(worker_client, ranged_job_near_its_end["id"], "fast-1")["leases"]) == 1


def test_a_slow_worker_takes_a_small_piece_but_not_a_range_the_others_finish_first(
    worker_client, ranged_job_near_its_end
):
    job_id = ranged_job_near_its_end["id"]
    # Next in order: the 3-record piece, 0.6 s at its pace, while the others
    # need 5 s for the 303 records left. It may take it.
    small = take(worker_client, job_id, "slow")["leases"]
    assert [(lease["start"], lease["end"]) for lease in small] == [(0, 3)]
    # Then a 150-record range: 30 s at its pace, the others finish the 300
    # records left in 5 s.
    result = take(worker_client, job_id, "slow")
    assert result["leases"] == [] and result["retry_after"] == 0.5


def test_a_worker_counts_the_records_of_the_items_it_finished(worker_client, job_name):
    # A range counts its records (its own once a split cut it, else its
    # unit's), a work read whole one; an item failed or given back, none.
    job = create_job(worker_client, job_name, ranges(150, 40, 7) + ["/d/whole.bin"], shuffle=False)
    leases = take(worker_client, job["id"], "w", count=4)["leases"]
    Item.objects.filter(id=leases[1]["id"]).update(range_start=0, range_end=25)  # as a cut leaves it
    finished = [{"id": lease["id"], "token": lease["token"]} for lease in (leases[0], leases[1], leases[3])]
    assert take(worker_client, job["id"], "w", complete=finished)["completed"] == sorted(x["id"] for x in finished)
    response = worker_client.post(
        f"/api/v1/leases/{leases[2]['id']}/fail/", {"token": leases[2]["token"], "error": "unreadable"}, format="json"
    )
    assert response.status_code == 200, response.content
    worker = Worker.objects.get(job_id=job["id"], name="w")
    assert (worker.items_done, worker.records_done) == (3, 150 + 25 + 1)


def deferred_since(job_id, name):
    return Worker.objects.values_list("deferred_since", flat=True).get(job_id=job_id, name=name)


def test_a_deferral_lasts_no_longer_than_the_workers_own_next_item(worker_client, job_near_its_end):
    # Plain DataLoaders whose loaders were each deferred to other processes'
    # loaders held a job for good: those read nothing while their own loop
    # waited on a deferred sibling, however fast they had been. The others
    # were to finish everything in the slow worker's 4 s; once deferred that
    # long, it takes the item.
    job_id = job_near_its_end["id"]
    assert take(worker_client, job_id, "slow")["retry_after"] == 0.5
    since = deferred_since(job_id, "slow")
    assert since is not None
    assert take(worker_client, job_id, "slow")["retry_after"] == 0.5
    assert deferred_since(job_id, "slow") == since  # from the first deferred take in a row
    Worker.objects.filter(job_id=job_id, name="slow").update(deferred_since=since - timedelta(seconds=3.9))
    assert take(worker_client, job_id, "slow")["retry_after"] == 0.5
    Worker.objects.filter(job_id=job_id, name="slow").update(deferred_since=since - timedelta(seconds=4.1))
    assert len(take(worker_client, job_id, "slow")["leases"]) == 1
    assert deferred_since(job_id, "slow") is None


def test_a_take_ahead_neither_starts_nor_ends_a_deferral(worker_client, job_near_its_end):
    job_id = job_near_its_end["id"]
    ahead = worker_client.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "slow", "ahead": True}, format="json")
    assert ahead.status_code == 200 and ahead.json()["leases"] == []
    assert deferred_since(job_id, "slow") is None  # its consumer reads the item in hand
    assert take(worker_client, job_id, "slow")["retry_after"] == 0.5
    since = deferred_since(job_id, "slow")
    worker_client.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "slow", "ahead": True}, format="json")
    assert deferred_since(job_id, "slow") == since


def test_a_take_ahead_counts_what_its_worker_holds_ahead_and_has_not_started(worker_client, job_name):
    # A look-ahead takes again while it still holds leases ahead (once half
    # its depth is left): the item it asks for comes after those too. 14
    # items, one in hand each, 11 pending: the fast workers drain them in
    # 5.5 s. The slow one, at 2.5 s per item, finishes the item after its
    # own in 5 s (it may lease it ahead); holding that one, the next would
    # end in 7.5 s (not ahead), unless its consumer has started it.
    job = one_in_hand_each(worker_client, job_name, 14, slow_seconds=2.5)
    path = f"/api/v1/jobs/{job['id']}/leases/"
    first = worker_client.post(path, {"worker": "slow", "ahead": True}, format="json").json()["leases"]
    assert len(first) == 1
    again = worker_client.post(path, {"worker": "slow", "ahead": True}, format="json")
    assert again.status_code == 200 and again.json()["leases"] == []
    started = worker_client.post(path, {"worker": "slow", "ahead": True, "started": [first[0]["id"]]}, format="json")
    assert len(started.json()["leases"]) == 1
