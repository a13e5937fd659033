"""How many leases a look-ahead keeps ahead of its loop: what the loop works through while a take is on its way.

One item taken ahead hides a take only when the loop works on an item
longer than the take's round trip. Over tiny items (strings handed on, an
item of a few milliseconds) the loop caught up with the take ahead at every
item and waited for it: 4-11 ms an item on the training thread at
``look_ahead=1``, where 16 ahead waited 3-34 us (bench/item_overhead.py,
bench/RESULTS.md). So a look-ahead measures both, the loop's time per item
(from handing one over to the next request, its waits left out) and a
take's round trip (the median of the last few that brought leases), and
keeps ahead what the loop works through in ``MARGIN`` round trips: at
least the queue's ``look_ahead``, at most ``MOST``, growing at most twice
over per take and only once a few takes are known, so that one short item
or one slow take does not lease sixteen; a loop that slows keeps fewer from
its next take. A loop slower than two round trips an item keeps one. What
it holds is bounded in the loop's time, about two takes' worth, and an item
ahead goes to a worker with nothing to read unless the loop started it
(worker_sdk.look_ahead).
"""

from __future__ import annotations

import collections
import math
import statistics

MOST = 16  # leases ahead at most, whatever the pace
MARGIN = 2.0  # the loop's work kept ahead, in take round trips: a take's time varies with the server's load
_DECAY = 0.75  # the weight of the loop's mean time per item so far against the last take's
_TAKES = 5  # round trips whose median sizes it
_FIRST_TAKES = 3  # it grows only once this many are known


class Depth:
    """The number of leases to keep ahead, from the loop's time per item and a take's round trip.

    ``most``: the most it may grow to (None, or no more than ``least``: it
    keeps ``least``, as a synchronous rank's quota-bound look-ahead does).
    """

    def __init__(self, least: int, most: int | None = None):
        if least < 1:
            raise ValueError(f"a look-ahead's depth must be at least 1, not {least}")
        self.least = least
        self.most = max(least, least if most is None else most)
        self._size = least
        # The loop's own time and items since the last take: a pace per take,
        # so that one item stretched by another thread (the GIL held while a
        # take's answer is read) counts for its share of the items, not alone.
        self._worked, self._items = 0.0, 0
        self._work: float | None = None  # seconds of the loop's own time per item (a decayed mean)
        # The last round trips of takes that brought leases: their median,
        # so that one slow take (a new connection, a retry, an epoch being
        # made) does not deepen it for dozens of items.
        self._takes: collections.deque[float] = collections.deque(maxlen=_TAKES)

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
        """A take ahead that brought leases took ``seconds``: the depth follows the loop's pace and the takes'."""
        self._takes.append(max(0.0, seconds))
        if self._items:
            pace = self._worked / self._items
            self._work = pace if self._work is None else self._work * _DECAY + pace * (1 - _DECAY)
            self._worked, self._items = 0.0, 0
        if not self.grows or self._work is None or len(self._takes) < _FIRST_TAKES:
            return
        take = statistics.median(self._takes)
        fits = MARGIN * take / self._work if self._work > 0 else math.inf
        self._size = max(self.least, min(self.most, 2 * self._size, math.ceil(min(fits, self.most))))
