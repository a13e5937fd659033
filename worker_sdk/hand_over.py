"""How many records ``dataset(hand_over_seconds=...)`` hands TensorFlow at once: what its loop takes in that long.

tf.data's ``from_generator`` costs a Python call on the pipeline's thread
per element it pulls: record by record, a pipeline of small records
(``dataset().batch(256)``) ran at a few thousand records a second, where
the same records handed over in blocks and unbatched inside TensorFlow ran
hundreds of times faster (bench/item_overhead.py, bench/RESULTS.md). A block's
records count as received once it is handed over, so a split can no longer
cut them, and a loop that stops in the middle of a block leaves its rest
read, not given back: a block holds at most what the loop takes in
``seconds``, measured as it runs, and never more than twice the last one.
"""

from __future__ import annotations

import math
from time import monotonic
from typing import Callable

MOST_RECORDS = 4096  # a block's records at most, whatever the pace: its memory
_DECAY = 0.75  # the weight of the pace measured so far against the last block's


class Blocks:
    """The size of the next block, from the loop's pace: the time the generator waited at each block's hand-over."""

    def __init__(self, seconds: float, most: int = MOST_RECORDS, clock: Callable[[], float] = monotonic):
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < math.inf:
            raise ValueError(
                f"hand_over_seconds must be a number of seconds > 0 (0 or None: no blocks), not {seconds!r}"
            )
        self.seconds, self.most, self.clock = seconds, most, clock
        self._size = 1  # until the pace is known: one record at a time, as without blocks
        self._pace: float | None = None  # seconds a record: a decayed mean over the blocks, each weighing the same

    def size(self) -> int:
        return self._size

    def taken(self, records: int, waited: float) -> None:
        """The loop took a block of ``records`` in ``waited`` seconds (from its hand-over to the next request)."""
        pace = waited / records
        # Per block, not per record: a loop that batches takes most blocks at
        # once and waits over one (its step), and a big block of a fast
        # spell would outweigh the slow ones after it.
        self._pace = pace if self._pace is None else self._pace * _DECAY + pace * (1 - _DECAY)
        # Compared before it is rounded: a pace of (nearly) nothing fits any number.
        fits = self.seconds / self._pace if self._pace > 0 else math.inf
        self._size = max(1, min(self.most, 2 * self._size, round(min(fits, self.most))))
