"""An agreed epoch's batch says, per lease, how many of its records it holds and whether its item's last is among them.

The rank's ledger completes an item once it trained on the item's last
record and counts what it trained on of the items it gives back; a batch
carries that as runs of consecutive records of one lease, not one entry
per record.
"""

import pickle

from worker_sdk.sync import Handed, Ledger, Run, SyncStats, runs


def handed(lease, count, last_at=None, token=None):
    return [Handed(f"{lease}-{i}", lease, token or lease * 10, i == last_at) for i in range(count)]


def test_consecutive_records_of_a_lease_are_one_run():
    batch = handed(1, 3, last_at=2) + handed(2, 2)
    assert runs(batch) == [Run(1, 10, 3, True), Run(2, 20, 2, False)]


def test_a_lease_that_comes_back_later_in_the_batch_is_a_run_of_its_own():
    batch = handed(1, 1) + handed(2, 1) + handed(1, 1)
    assert runs(batch) == [Run(1, 10, 1, False), Run(2, 20, 1, False), Run(1, 10, 1, False)]


def test_an_item_leased_again_under_a_new_token_is_another_run():
    assert runs(handed(1, 1) + handed(1, 1, token=11)) == [Run(1, 10, 1, False), Run(1, 11, 1, False)]


def test_a_handed_record_survives_the_trip_from_a_loader_process():
    record = Handed({"x": 1}, 7, 9, True)
    assert pickle.loads(pickle.dumps(record)) == record and record.last


class Leases:
    def __init__(self):
        self.completed, self.released = [], []

    def complete(self, lease_id, token):
        self.completed.append((lease_id, token))

    def release(self, lease_id, token, reason):
        self.released.append((lease_id, token))


def test_the_ledger_completes_an_item_at_its_last_run_and_gives_back_the_rest_counting_rereads():
    leases, stats = Leases(), SyncStats()
    ledger = Ledger(leases, stats)
    ledger.trained(runs(handed(1, 2)))
    ledger.trained(runs(handed(1, 1, last_at=0) + handed(2, 3)))
    ledger.seen(runs(handed(3, 4)))  # read ahead, never trained on
    ledger.give_back("epoch stopped")
    assert leases.completed == [(1, 10)] and stats.completed == 1
    assert sorted(leases.released) == [(2, 20), (3, 30)]
    assert stats.released == 2 and stats.reread == 3  # item 2's three records are read again
