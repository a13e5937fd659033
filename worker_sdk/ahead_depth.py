"""How many leases a look-ahead keeps ahead of its loop: what the loop works through while a take is on its way.

One item taken ahead hides a take only when the loop works on an item
longer than the take's round trip. Over tiny items (strings handed on, an
item of a few milliseconds) the loop caught up with the take ahead at every
item and waited for it: 4-11 ms an item on the training thread at
``look_ahead=1``, where 16 ahead waited 3-34 us (bench/item_overhead.py,
bench/RESULTS.md). So a look-ahead measures both, the loop's time per item
(from handing one over to the next request, its waits left out) and a
take's round trip, and keeps ahead what the loop works through in
``MARGIN`` round trips: at least the queue's ``look_ahead``, at most
``MOST``, and growing at most twice over per take, so that one short item
does not lease sixteen; a loop that slows keeps fewer from its next take. What it holds is then bounded in the loop's time, about two
takes' worth, and an item ahead goes to a worker with nothing to read
unless the loop started it (worker_sdk.look_ahead): the tail it holds is
about as short as one item ahead held.
"""

from __future__ import annotations

import math

MOST = 16  # leases ahead at most, whatever the pace
MARGIN = 2.0  # the loop's work kept ahead, in take round trips: a take's time varies with the server's load
_DECAY = 0.75  # the weight of the mean so far against the last measurement


class Depth:
    """The number of leases to keep ahead, from the loop's time per item and a take's round trip."""

    def __init__(self, least: int, most: int | None = None):
        if least < 1:
            raise ValueError(f"a look-ahead's depth must be at least 1, not {least}")
        self.least = least
        self.most = max(least, MOST if most is None else most)
        self._size = least
        # The loop's own time and items since the last take: a pace per take,
        # so that one item stretched by another thread (the GIL held while a
        # take's answer is read) counts for its share of the items, not alone.
        self._worked, self._items = 0.0, 0
        self._work: float | None = None  # seconds of the loop's own time per item (a decayed mean)
        self._take: float | None = None  # seconds a take ahead took (a decayed mean)

    def size(self) -> int:
        return self._size

    @property
    def grows(self) -> bool:
        """Whether it follows the loop (False: it is ``least`` always)."""
        return self.most > self.least

    def worked(self, seconds: float) -> None:
        """The loop spent ``seconds`` on an item: from its hand-over to the loop's next request."""
        self._worked += max(0.0, seconds)
        self._items += 1

    def took(self, seconds: float) -> None:
        """A take ahead's round trip lasted ``seconds``: the depth follows both means."""
        self._take = _mean(self._take, max(0.0, seconds))
        if self._items:
            self._work = _mean(self._work, self._worked / self._items)
            self._worked, self._items = 0.0, 0
        if not self.grows or self._work is None:
            return
        fits = MARGIN * self._take / self._work if self._work > 0 else math.inf
        self._size = max(self.least, min(self.most, 2 * self._size, math.ceil(min(fits, self.most))))


def _mean(mean: float | None, value: float) -> float:
    return value if mean is None else mean * _DECAY + value * (1 - _DECAY)
