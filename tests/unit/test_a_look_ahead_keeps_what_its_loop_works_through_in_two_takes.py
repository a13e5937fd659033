"""A look-ahead's depth (worker_sdk.ahead_depth): the items its loop works through while a take is on its way.

One item ahead hides a take only when the loop spends longer on an item
than the take's round trip; a quicker loop waited for the take at every
item. The depth covers two round trips of the loop's measured time per
item, between the queue's ``look_ahead`` and ``MOST``, and grows at most
twice over per measurement, so that one quick item does not lease sixteen.
"""

import pytest

from worker_sdk.ahead_depth import MOST, Depth


def depths(depth: Depth, work: float, take: float, count: int) -> list[int]:
    """The depth after each of ``count`` items of ``work`` seconds, a take of ``take`` seconds after each."""
    seen = []
    for _ in range(count):
        depth.worked(work)
        depth.took(take)
        seen.append(depth.size())
    return seen


def test_a_loop_slower_than_a_take_keeps_one_ahead():
    depth = Depth(1)
    # 36 ms an item, 10 ms a take: one item ahead covers it.
    assert depths(depth, 0.036, 0.010, 10) == [1] * 10


def test_a_quick_loop_doubles_its_depth_up_to_two_round_trips_of_its_work():
    depth = Depth(1)
    # 2.5 ms an item, 10 ms a take: two round trips are 8 items.
    assert depths(depth, 0.0025, 0.010, 6) == [2, 4, 8, 8, 8, 8]


def test_a_loop_with_no_work_stops_at_the_most():
    depth = Depth(1)
    assert depths(depth, 0.0, 0.010, 8)[-1] == MOST
    assert Depth(1, most=4).size() == 1
    capped = Depth(1, most=4)
    assert depths(capped, 0.0, 0.010, 5) == [2, 4, 4, 4, 4]


def test_a_loop_that_slows_keeps_fewer_from_its_next_take():
    depth = Depth(1)
    depths(depth, 0.0, 0.010, 8)
    assert depth.size() == MOST
    # One step of 2 s (an evaluation, a checkpoint): the mean of the loop's
    # time per item is then far above a take's.
    depth.worked(2.0)
    assert depth.size() == MOST
    depth.took(0.010)
    assert depth.size() == 1


def test_an_item_stretched_among_quick_ones_counts_for_its_share():
    depth = Depth(1)
    depths(depth, 0.0001, 0.005, 8)
    assert depth.size() == MOST
    # Sixteen items since the last take, one of them held 3 ms by another
    # thread: 0.3 ms an item on the whole, still well under a take.
    for seconds in [0.003] + [0.0001] * 15:
        depth.worked(seconds)
    depth.took(0.005)
    assert depth.size() == MOST


def test_nothing_grows_before_both_are_measured():
    depth = Depth(1)
    depth.worked(0.0)
    assert depth.size() == 1
    depth = Depth(1)
    depth.took(0.010)
    depth.took(0.010)
    assert depth.size() == 1


def test_a_number_given_is_kept_to():
    # look_ahead=N: N ahead whatever the pace (most=N), and a depth past
    # MOST (a synchronous rank's quota) is its own floor.
    fixed = Depth(3, most=3)
    assert depths(fixed, 0.0, 0.010, 5) == [3] * 5
    deep = Depth(64)
    assert depths(deep, 0.0, 0.010, 3) == [64] * 3
    assert depths(Depth(2), 0.1, 0.010, 3) == [2] * 3


def test_a_depth_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        Depth(0)
