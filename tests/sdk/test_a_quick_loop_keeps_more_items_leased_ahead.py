"""A loop quicker than a take keeps more items leased ahead; ``look_ahead=N`` keeps N.

One item ahead hides a take only when the loop spends longer on an item
than a take's round trip. By default a look-ahead measures both and keeps
what the loop works through in two round trips, 16 at most
(worker_sdk.ahead_depth), so a loop over tiny items no longer waits for a
take at every item. A number given to ``WorkQueue(look_ahead=...)`` is
kept to. Real server (the ASGI one of tests/support.py).
"""

import pytest

from worker_sdk import WorkQueue
from worker_sdk.ahead_depth import MOST
from worker_sdk.client import Client

pytestmark = pytest.mark.timeout(120)

ITEMS = [f"/tiny/{i:04d}" for i in range(300)]


@pytest.fixture
def takes(monkeypatch):
    """Each take ahead this process sent: (the count it asked for, the leases it got)."""
    seen = []
    take = Client.take

    def recorded(self, job_id, request):
        answer = take(self, job_id, request)
        if request.ahead:
            seen.append((request.count, len(answer.leases)))
        return answer

    monkeypatch.setattr(Client, "take", recorded)
    return seen


def test_a_loop_over_tiny_items_takes_several_a_request_and_reads_each_once(sdk_env, takes):
    queue = WorkQueue(ITEMS, shuffle=False)
    assert list(queue.items()) == ITEMS
    asked = [count for count, _ in takes]
    leased = sum(got for _, got in takes)
    # One a take would be about 300 takes ahead. The depth doubles from one
    # to MOST in a few takes, then each take fills in what the loop started.
    assert MOST / 2 < max(asked) <= MOST, takes
    assert len(takes) < len(ITEMS) / 4, takes
    assert leased > len(ITEMS) / 2
    marks = queue.watermarks()
    assert (marks["done"], marks["leased"], marks["pending"]) == (len(ITEMS), 0, 0)


def test_look_ahead_n_keeps_n_however_quick_the_loop(sdk_env, takes):
    queue = WorkQueue(ITEMS[:40], shuffle=False, look_ahead=2)
    assert list(queue.items()) == ITEMS[:40]
    assert takes
    assert max(count for count, _ in takes) <= 2


@pytest.mark.parametrize("value", [-1, 1.5, True, "2"])
def test_a_look_ahead_that_is_not_a_count_is_refused(sdk_env, value):
    with pytest.raises(ValueError, match="look_ahead must be None or an integer"):
        WorkQueue(ITEMS, look_ahead=value)
