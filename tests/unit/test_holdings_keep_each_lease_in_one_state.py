"""worker_sdk.holdings: what a process holds, each lease in one state, without a server.

The leaser's requests change these states before and after each answer;
the heartbeat reads them. Held to here: a finished lease is heartbeated
until answered and not while it is being sent; an item leased again
under a newer token outlives its old lease's answer; a lease lost while
taken ahead calls its consumer's claim; settle's wait ends on an answer.
"""

import threading
import time

import pytest

from worker_sdk.holdings import Holdings
from worker_sdk.protocol import Lease

pytestmark = pytest.mark.timeout(30)


def lease(lease_id: int, token: int = 1, **fields) -> Lease:
    return Lease(lease_id, token, f"/item-{lease_id}", 0, lease_id, **fields)


def beaten(held: Holdings) -> list[int]:
    return [held_lease.id for held_lease, _tracker, _started in held.to_heartbeat()]


def test_a_finished_lease_is_heartbeated_until_answered_and_not_while_sent():
    held = Holdings()
    a, b = lease(1), lease(2)
    held.took([], (), [a, b])
    first, started = held.before_take([a])
    assert (first, started, beaten(held)) == (None, (), [1, 2])
    sent = held.start_sending()
    assert sent == [a] and beaten(held) == [2] and not held.holds(a) and held.holds(b)
    assert held.start_sending() == []  # one request sends it, not two
    held.stop_sending(sent)  # no answer: finished still, heartbeated again, sent by the next request
    assert beaten(held) == [1, 2] and held.start_sending() == [a]
    held.took([a], (), [])
    assert (held.known(), beaten(held)) == (1, [2])


def test_an_item_leased_again_under_a_newer_token_outlives_its_old_lease():
    held = Holdings()
    old, new = lease(7, token=1), lease(7, token=2)
    held.took([], (), [old])
    held.took([], (), [new])  # a restore reopened the item, and a take leased it anew
    assert held.lose(7, token=1) == (False, None, True)
    held.answered([old])
    assert held.holds(new) and beaten(held) == [7]
    assert held.lose(7, token=2)[0] and held.known() == 0


def test_a_lease_lost_while_taken_ahead_hands_back_its_claim_once():
    held = Holdings()
    ahead = lease(3)
    held.took([], (), [ahead])
    claims = []
    assert held.hold_ahead(ahead, lambda: claims.append(3) or True)
    forgotten, claim, reported = held.lose(3, token=1)
    assert forgotten and not reported and claim() and claims == [3]
    assert held.lose(3, token=None)[1:] == (None, True)  # said once
    assert not held.hold_ahead(ahead, lambda: True)  # lost before its consumer held it: not to be read


def test_a_started_lease_is_named_by_the_next_take_until_the_server_heard():
    held = Holdings()
    ahead = lease(4)
    held.took([], (), [ahead])
    held.hold_ahead(ahead, lambda: True)
    held.started([ahead])
    assert held.asked_back(4) == (None, ahead)  # started: no claim to give it back with
    _first, started = held.before_take([])
    assert started == (4,)
    held.took([], started, [])
    assert held.before_take([])[1] == ()


def test_a_local_work_is_handed_first_and_never_held_or_sent():
    held = Holdings()
    local, mine = lease(5, local=True), lease(6)
    held.hand_first([local, mine])
    assert held.known() == 1 and held.held_pairs() == [(6, 1)]
    assert held.before_take([])[0] == local
    assert not held.to_give_back(local)  # back to the front: the next consumer reads it first
    assert held.before_take([local])[0] == local and held.start_sending() == []


def test_settles_wait_ends_when_another_request_is_answered():
    held = Holdings()
    a = lease(8)
    held.took([], (), [a])
    held.finish([a])
    sent = held.start_sending()
    assert held.wait_sent(time.monotonic() + 0.05) is False  # on its way, unanswered: the deadline
    answer = threading.Timer(0.05, held.answered, args=(sent,))
    answer.start()
    assert held.wait_sent(time.monotonic() + 10) is True
    answer.join()
    held.took([], (), [lease(9)])
    held.finish([lease(9)])
    assert held.wait_sent(time.monotonic() + 10) is None  # finished and not on its way: the caller sends it


def test_given_back_and_unfinished_leases():
    held = Holdings()
    a, b, c = lease(10), lease(11), lease(12)
    held.took([], (), [a, b, c])
    held.finish([a])
    assert held.unfinished() == [b, c] and beaten(held) == [10]
    held.given_back(b)
    held.stop_sending([c])
    assert held.known() == 2 and beaten(held) == [10, 12]
    assert held.lose(11, token=None)[2]  # given back: its loss is not news


def test_each_lease_lost_or_given_back_unanswered_is_counted_once():
    # What a synchronous rank asks (WorkQueue.leases_lost) to know whether
    # its epoch kept everything it leased: each lease once, an item leased
    # again under a newer token as a lease of its own.
    held = Holdings()
    held.took([], (), [lease(20, token=1)])
    assert held.lose(20, token=1)[0] and held.lost == 1
    held.lose(20, token=1)  # a heartbeat and a completion's answer both say so
    assert held.lost == 1
    held.took([], (), [lease(20, token=2)])
    assert held.lose(20, token=1) == (False, None, True) and held.lost == 1  # the old lease's: this one stands
    held.lose(20, token=2)
    assert held.lost == 2
    refused, answered, fenced = lease(21), lease(22), lease(23)
    held.took([], (), [refused, answered, fenced])
    for given in (refused, answered):
        assert held.to_give_back(given)
    held.given_back(refused, refused=True)  # lost meanwhile, or no answer: its item may fail on the way
    held.given_back(answered)
    assert held.lost == 3
    held.forget_all()  # a restore fenced what was held
    assert held.lost == 4 and held.known() == 0
