"""worker_sdk.receipts: a loader's records count as read when the loop's process receives their batch, without a server.

The loader notes each batch it collates on the range's tracker; the loop's
process claims a batch's records on the board as it receives it; the
loader's heartbeat answers splits from the board. Held to here: a split
cuts at the start of a batch on its way, and those batches are dropped
whole; a range whose last batch holds the next range's records is not cut
below it; the loop waits for an offer on its way to the server; a freed
slot's records are never delivered; a dead loader's leases are found with
the position the loop received, once.
"""

import multiprocessing
import os
import signal
import threading

import pytest

from worker_sdk import loader_board, receipts
from worker_sdk.protocol import Lease

pytestmark = pytest.mark.timeout(30)

LOADER = 0


def range_lease(lease_id: int, start: int, end: int) -> Lease:
    return Lease(lease_id, 1, f"/part?start={start}&end={end}", 0, lease_id, start=start, end=end)


def reading(board: loader_board.Board, lease: Lease) -> receipts.SharedTracker:
    slot = board.take_slot(LOADER, lease)
    assert slot is not None
    return receipts.SharedTracker(board, LOADER, slot, lease)


def batch(tracker: receipts.SharedTracker, first: int, end: int, last: bool = False) -> bytes:
    return receipts.encode([(LOADER, tracker.slot, tracker.lease.id, first, end, int(last))])


def collated(board: loader_board.Board, tracker: receipts.SharedTracker, *batches, others_after: bool = False) -> None:
    """The loader collated these batches of the range, each beginning with one of its records."""
    with board.locked(LOADER):
        for first, end in batches:
            tracker.collated(first, end, begins_batch=True, others_after=others_after and (first, end) == batches[-1])


@pytest.fixture
def board():
    board = loader_board.Board(1, multiprocessing.get_context("fork"))
    board.started(LOADER)  # this process plays the loader
    return board


def test_a_split_cuts_at_the_start_of_a_batch_on_its_way_and_its_batches_are_dropped(board):
    tracker = reading(board, range_lease(7, 0, 100))
    collated(board, tracker, (0, 8), (8, 16), (16, 24), (24, 32))
    assert board.receive(batch(tracker, 0, 8))
    assert tracker.position == 8  # what the heartbeat reports: received, not read

    # The server plans the cut at record 3; the loop has received 8, and the
    # batches from 8 on are collated, so the first point is where one begins.
    assert tracker.try_split(3) == 8
    tracker.settle_split(True)
    assert tracker.end == 8
    for first in (8, 16, 24):
        assert not board.receive(batch(tracker, first, first + 8)), f"the batch at {first} lies past the cut"
    with board.locked(LOADER):
        assert tracker.deliverable(32) is False  # read ahead, not collated yet: left out of its batch
    assert tracker.received_whole()


def test_a_cut_past_what_was_collated_leaves_the_batches_on_their_way_to_the_loop(board):
    tracker = reading(board, range_lease(8, 100, 200))
    collated(board, tracker, (100, 108), (108, 116))
    assert tracker.try_split(150) == 150
    tracker.settle_split(True)
    assert board.receive(batch(tracker, 100, 108)) and board.receive(batch(tracker, 108, 116))
    with board.locked(LOADER):
        assert tracker.deliverable(149) is True and tracker.deliverable(150) is False
    assert tracker.position == 116 and not tracker.received_whole()


def test_a_range_whose_last_batch_holds_the_next_ranges_records_is_not_cut_below_it(board):
    tracker = reading(board, range_lease(9, 0, 20))
    collated(board, tracker, (0, 8), (8, 16), (16, 20), others_after=True)
    assert board.receive(batch(tracker, 0, 8))
    # Dropping the batch at 16 would drop the next range's records with it,
    # and delivering it would deliver records past any cut below 20.
    assert tracker.try_split(8) is None
    assert tracker.end == 20


def test_the_loop_waits_for_an_offer_on_its_way_to_the_server(board):
    tracker = reading(board, range_lease(10, 0, 100))
    collated(board, tracker, (0, 8), (8, 16))
    assert tracker.try_split(8) == 8
    kept = []
    loop = threading.Thread(target=lambda: kept.append(board.receive(batch(tracker, 8, 16))))
    loop.start()
    loop.join(0.3)
    assert loop.is_alive(), "the loop took a batch past an offer the server has not answered"
    tracker.settle_split(False)  # refused: the range reads on
    loop.join(5)
    assert kept == [True] and tracker.position == 16


def test_a_freed_slots_records_are_never_delivered(board):
    lease = range_lease(11, 0, 10)
    tracker = reading(board, lease)
    assert board.receive(batch(tracker, 0, 10, last=True))
    assert tracker.received_whole()
    board.free_slot(LOADER, tracker.slot)
    newer = reading(board, range_lease(12, 50, 60))
    assert newer.slot == tracker.slot  # the slot went to the loader's next range
    with board.locked(LOADER):
        assert tracker.deliverable(5) is False
    assert not board.receive(batch(tracker, 5, 6)), "a batch of the old range claimed the new one's slot"
    assert newer.position == 50
    # A heartbeat that still holds the old tracker changes nothing of the new range.
    assert tracker.try_split(0) is None
    tracker.settle_split(True)
    tracker.stop()
    assert (newer.position, newer.end) == (50, 60)
    assert tracker.received_whole() and tracker.position == 10


def test_the_loop_drops_a_batch_whose_loader_died_with_an_offer_on_its_way(board):
    context = multiprocessing.get_context("fork")
    loader = context.Process(target=board.started, args=(LOADER,))
    loader.start()
    loader.join(10)
    tracker = reading(board, range_lease(13, 0, 100))
    collated(board, tracker, (0, 8), (8, 16))
    assert tracker.try_split(8) == 8  # and the loader's process is gone before its heartbeat settles it
    kept = []
    loop = threading.Thread(target=lambda: kept.append(board.receive(batch(tracker, 8, 16))))
    loop.start()
    loop.join(10)
    assert not loop.is_alive(), "the loop waited for an offer no process will settle"
    assert kept == [False]


def test_a_dead_loaders_leases_are_found_with_what_the_loop_received():
    context = multiprocessing.get_context("fork")
    dead = loader_board.Board(2, context)
    dead.started(0)  # a live loader: its leases are its own to settle
    loader = context.Process(target=dead.started, args=(1,))
    loader.start()
    loader.join(10)

    def slot_of(loader_index, lease):
        slot = dead.take_slot(loader_index, lease)
        return receipts.SharedTracker(dead, loader_index, slot, lease)

    alive = slot_of(0, range_lease(20, 0, 10))
    whole, part, unread, answered, stopped = (
        slot_of(1, range_lease(lease_id, 0, 10)) for lease_id in (21, 22, 23, 24, 25)
    )
    for tracker in (alive, whole, part, answered, stopped):
        assert dead.receive(receipts.encode([(tracker.loader, tracker.slot, tracker.lease.id, 0, 4, 0)]))
    assert dead.receive(receipts.encode([(1, whole.slot, 21, 4, 10, 1)]))
    dead.free_slot(1, answered.slot)  # the server answered for it before the loader died
    # The loader gave the rest back, and died before the server had it: the
    # orphan is settled against the range the server knows.
    assert stopped.give_back() == (4, False)
    assert not dead.receive(receipts.encode([(1, stopped.slot, 25, 4, 8, 0)])), "a batch past the stop was delivered"

    orphans = {orphan.lease_id: orphan for orphan in dead.orphans()}
    assert sorted(orphans) == [21, 22, 23, 25]
    assert (orphans[21].received, orphans[22].received, orphans[23].received) == (10, 4, 0)
    assert orphans[22].token == 1 and (orphans[22].start, orphans[22].end) == (0, 10)
    assert (orphans[25].received, orphans[25].end) == (4, 10)
    assert dead.orphans() == []  # their slots are free: each is settled once
    assert alive.position == 4


def _hold_the_lock_and_die(board: loader_board.Board) -> None:
    board.started(LOADER)
    with board.locked(LOADER):
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_loader_killed_while_holding_its_lock_does_not_hold_the_loop(board):
    tracker = reading(board, range_lease(30, 0, 100))
    loader = multiprocessing.get_context("fork").Process(target=_hold_the_lock_and_die, args=(board,))
    loader.start()
    loader.join(10)
    kept = []
    loop = threading.Thread(target=lambda: kept.append(board.receive(batch(tracker, 0, 8))))
    loop.start()
    loop.join(10)
    assert not loop.is_alive(), "the loop waited for the lock of a dead loader"
    assert kept == [False]
    assert [orphan.lease_id for orphan in board.orphans()] == [30]
