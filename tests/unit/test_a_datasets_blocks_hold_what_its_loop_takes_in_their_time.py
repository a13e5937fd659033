"""``dataset(hand_over_seconds=...)``'s blocks (worker_sdk.hand_over): what the loop takes in that long, found as it runs.

A block's records count as received once handed over, so its size is what
a split can no longer take back: it follows the loop's measured pace,
grows at most twice over per block and shrinks at once when the loop slows.
"""

import pytest

from worker_sdk.hand_over import Blocks


def sizes(blocks: Blocks, pace: float, count: int) -> list[int]:
    """The sizes of ``count`` blocks taken by a loop that spends ``pace`` seconds on each record."""
    seen = []
    for _ in range(count):
        size = blocks.size()
        seen.append(size)
        blocks.taken(size, size * pace)
    return seen


def test_the_first_block_is_one_record_and_blocks_double_up_to_the_loops_time():
    blocks = Blocks(0.01)
    # 100 us a record: 100 records in 10 ms.
    assert sizes(blocks, 0.0001, 9) == [1, 2, 4, 8, 16, 32, 64, 100, 100]


def test_a_loop_that_slows_gets_small_blocks_at_once():
    blocks = Blocks(0.01)
    sizes(blocks, 0.00001, 20)
    assert blocks.size() == 1000  # 10 us a record
    blocks.taken(1000, 1.0)  # a step of 1 s over the last block: 1 ms a record
    assert blocks.size() < 100
    sizes(blocks, 0.05, 10)
    assert blocks.size() == 1  # 50 ms a record: more than the block's time


def test_a_block_never_holds_more_than_its_most():
    blocks = Blocks(0.01, most=64)
    assert max(sizes(blocks, 0.0, 12)) == 64  # a loop that takes no time at all


def test_a_loop_that_takes_no_time_at_all_for_long_gets_the_most():
    blocks = Blocks(0.01, most=64)
    sizes(blocks, 0.0001, 3)
    sizes(blocks, 0.0, 5000)  # the decayed pace reaches nothing: no overflow
    assert blocks.size() == 64


@pytest.mark.parametrize("seconds", [0, -0.5, float("inf"), float("nan"), None, True, "0.01"])
def test_a_blocks_time_must_be_a_finite_positive_number(seconds):
    with pytest.raises(ValueError, match="hand_over_seconds must be a number of seconds > 0"):
        Blocks(seconds)
