"""num_slices is split over works in proportion to their records."""

from server.services.slicing import allocate, bounds


def test_slices_are_proportional_and_sum_to_the_request():
    assert allocate([1000, 1000], 10) == [5, 5]
    counts = allocate([900, 90, 10], 100)
    assert sum(counts) == 100 and counts[0] > counts[1] > counts[2] >= 1


def test_every_non_empty_work_gets_at_least_one_slice():
    counts = allocate([10_000, 1, 1, 1], 4)
    assert counts == [1, 1, 1, 1]
    counts = allocate([10_000, 1, 1, 1], 20)
    assert counts[1:] == [1, 1, 1] and sum(counts) == 20


def test_a_work_never_gets_more_slices_than_records():
    assert allocate([3, 2], 100) == [3, 2]


def test_slice_sizes_within_a_work_differ_by_at_most_one():
    spans = bounds(1003, 10)
    sizes = [end - start for start, end in spans]
    assert spans[0][0] == 0 and spans[-1][1] == 1003 and max(sizes) - min(sizes) <= 1
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
