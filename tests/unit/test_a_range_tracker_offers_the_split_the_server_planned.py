"""worker_sdk.tracker: where a reader offers to stop when the server asks for a split.

The server plans a split by time (server/sql/propose_split.sql): from a
slow reader it may ask for fewer records than the floor in records
(``min_records``). The reader offers the point asked if it is not past it;
past it, only as much as leaves the floor to the remainder, or, for a point
asked close to the end, half of what was asked.
"""

from worker_sdk.tracker import RangeTracker


def read_to(tracker: RangeTracker, position: int) -> None:
    for record in range(tracker.start, position):
        assert tracker.try_claim(record)


def test_a_point_that_leaves_the_floor_is_offered_and_ends_the_range():
    tracker = RangeTracker(0, 100)
    read_to(tracker, 10)
    assert tracker.try_split(50, min_records=16) == 50
    tracker.settle_split(True)
    assert tracker.end == 50 and not tracker.try_claim(50)


def test_a_reader_past_the_point_offers_where_it_is_while_the_floor_is_left():
    tracker = RangeTracker(0, 100)
    read_to(tracker, 60)
    assert tracker.try_split(50, min_records=16) == 60
    tracker.settle_split(False)
    assert tracker.end == 100 and tracker.try_claim(60)


def test_a_point_closer_to_the_end_than_the_floor_is_offered_when_the_reader_is_not_past_it():
    tracker = RangeTracker(0, 100)
    read_to(tracker, 90)
    assert tracker.try_split(95, min_records=16) == 95  # a slow reader: 5 records are worth a split
    tracker.settle_split(True)
    assert tracker.end == 95


def test_past_a_point_closer_than_the_floor_the_reader_offers_where_it_is_while_half_is_left():
    # The point is the server's estimate of where the reader will be; a
    # reader of a 15-record slice is often a few records past it.
    tracker = RangeTracker(0, 100)
    read_to(tracker, 97)
    assert tracker.try_split(95, min_records=16) == 97  # 3 left of the 5 asked
    tracker.settle_split(True)
    assert tracker.end == 97


def test_past_a_point_closer_than_the_floor_the_reader_refuses_less_than_half_of_it():
    tracker = RangeTracker(0, 100)
    read_to(tracker, 98)
    assert tracker.try_split(95, min_records=16) is None  # 2 left of the 5 asked
    assert tracker.try_split(100, min_records=16) is None  # nothing left
    assert tracker.end == 100 and tracker.try_claim(98)
