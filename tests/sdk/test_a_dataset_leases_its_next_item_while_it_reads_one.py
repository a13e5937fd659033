"""``dataset()`` leases its next item while its consumer reads one: no take between two items on the consumer's wait.

A slot took its next item only once its consumer had received the last one
whole, so a TF loop fed by one slot waited for a take at every item's end
(10-15 ms on a 2-core machine, per item). With ``WorkQueue(look_ahead=1)``
(the default's least) the first slot's next item is leased on a thread while it
reads one (worker_sdk.look_ahead), and that slot is the one that takes when
no sibling reads; one taken ahead and not started goes back unread when the
loop stops. Real server, real TensorFlow.
"""

import pytest

from server.models import Event, Item
from tests.support import wait_until
from worker_sdk import WorkQueue
from worker_sdk.look_ahead import STOPPED_REASON

from .sliced_file import every_record, sliced_works

pytestmark = [pytest.mark.tf, pytest.mark.timeout(120)]


def counts(queue):
    marks = queue.watermarks()
    return marks["done"], marks["leased"], marks["pending"]


@pytest.mark.parametrize("cycle_length", [1, 3])
def test_the_next_item_is_leased_while_the_consumer_reads_and_given_back_unread_when_it_stops(
    sdk_env, tmp_path, cycle_length
):
    # One item ahead, whatever the pace: this loop takes no time, so the
    # default would keep more (worker_sdk.ahead_depth).
    queue = WorkQueue(sliced_works(tmp_path, 4, 4), shuffle=False, look_ahead=1)
    records = queue.dataset(cycle_length=cycle_length).as_numpy_iterator()
    # The first item whole and the second's first record: near a job's end
    # (here, all of it) a worker takes ahead once its pace is known, so from
    # its second item on.
    read = [next(records) for _ in range(5)]
    assert read == every_record(4, 4)[:5]
    wait_until(lambda: counts(queue) == (1, 2, 1), 10, 0.02, "the third item leased ahead of the second's end")
    third = Item.objects.get(job_id=queue.job["id"], position=2)
    assert (third.state, third.ahead) == ("leased", True)
    # The loop stops in the second item (its iterator goes, and with it the
    # dataset's reading): the third, not started, goes back unread, its
    # attempt returned, and the second's unread rest goes back too.
    del records
    wait_until(lambda: counts(queue)[1] == 0, 10, 0.02, "every lease given back")
    third.refresh_from_db()
    assert (third.state, third.attempts) == ("pending", 0)
    released = Event.objects.filter(job_id=queue.job["id"], kind="released").values_list("message", flat=True)
    assert STOPPED_REASON in list(released)
    rest = list(queue.dataset(cycle_length=1).as_numpy_iterator())
    assert sorted(read + rest) == sorted(every_record(4, 4))


def test_a_loop_reads_every_record_once_with_items_leased_ahead(sdk_env, tmp_path):
    queue = WorkQueue(sliced_works(tmp_path, 8, 4), shuffle=False)
    assert list(queue.dataset(cycle_length=1).as_numpy_iterator()) == every_record(8, 4)
    assert counts(queue) == (8, 0, 0)
    ahead = Item.objects.filter(job_id=queue.job["id"], ahead=True)
    assert not ahead.exists()  # each was started: the mark is cleared as its consumer begins it


def test_look_ahead_0_takes_each_item_once_the_last_was_received(sdk_env, tmp_path):
    queue = WorkQueue(sliced_works(tmp_path, 4, 4), shuffle=False, look_ahead=0)
    records = queue.dataset(cycle_length=1).as_numpy_iterator()
    assert [next(records) for _ in range(6)] == every_record(4, 4)[:6]
    assert counts(queue) == (1, 1, 2)
    assert list(records) == every_record(4, 4)[6:]
    assert counts(queue) == (4, 0, 0)
