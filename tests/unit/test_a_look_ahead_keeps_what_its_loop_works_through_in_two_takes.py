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


def test_a_loop_slower_than_two_takes_keeps_one_ahead_and_one_between_keeps_two():
    # 36 ms an item, 10 ms a take: one item ahead covers it.
    assert depths(Depth(1, MOST), 0.036, 0.010, 10) == [1] * 10
    # 15 ms an item: a take's time is left when the loop starts the one ahead.
    assert depths(Depth(1, MOST), 0.015, 0.010, 10)[-1] == 2


def test_a_quick_loop_doubles_its_depth_up_to_two_round_trips_of_its_work():
    depth = Depth(1, MOST)
    # 2.5 ms an item, 10 ms a take: two round trips are 8 items. It grows
    # once three takes are known.
    assert depths(depth, 0.0025, 0.010, 8) == [1, 1, 2, 4, 8, 8, 8, 8]


def test_a_loop_with_no_work_stops_at_the_most():
    depth = Depth(1, MOST)
    assert depths(depth, 0.0, 0.010, 8)[-1] == MOST
    capped = Depth(1, most=4)
    assert depths(capped, 0.0, 0.010, 6) == [1, 1, 2, 4, 4, 4]


def test_one_slow_take_does_not_deepen_it():
    # A first take of 1 s (a new connection, a retry), then takes of 10 ms,
    # under a loop of 50 ms an item: more than two round trips, so one.
    depth = Depth(1, MOST)
    depth.worked(0.05)
    depth.took(1.0)
    assert depths(depth, 0.05, 0.010, 10) == [1] * 10


def test_a_loop_that_slows_keeps_fewer_from_its_next_take():
    depth = Depth(1, MOST)
    depths(depth, 0.0, 0.010, 8)
    assert depth.size() == MOST
    # One step of 2 s (an evaluation, a checkpoint): the mean of the loop's
    # time per item is then far above a take's.
    depth.worked(2.0)
    assert depth.size() == MOST
    depth.took(0.010)
    assert depth.size() == 1


def test_an_item_stretched_among_quick_ones_counts_for_its_share():
    depth = Depth(1, MOST)
    depths(depth, 0.0001, 0.005, 8)
    assert depth.size() == MOST
    # Sixteen items since the last take, one of them held 3 ms by another
    # thread: 0.3 ms an item on the whole, still well under a take.
    for seconds in [0.003] + [0.0001] * 15:
        depth.worked(seconds)
    depth.took(0.005)
    assert depth.size() == MOST


def test_nothing_grows_before_both_are_measured():
    depth = Depth(1, MOST)
    depth.worked(0.0)
    assert depth.size() == 1
    depth = Depth(1, MOST)
    for _ in range(5):
        depth.took(0.010)
    assert depth.size() == 1


def test_a_number_given_is_kept_to():
    # look_ahead=N: N ahead whatever the pace (most=N); without a most (a
    # synchronous rank's quota-bound look-ahead) it never grows.
    assert depths(Depth(3, most=3), 0.0, 0.010, 6) == [3] * 6
    assert depths(Depth(2), 0.0, 0.010, 6) == [2] * 6
    assert depths(Depth(2, MOST), 0.1, 0.010, 6) == [2] * 6


def test_a_depth_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        Depth(0)
