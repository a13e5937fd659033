"""``dataset()``'s slot acknowledges what its consumer received whole with its next take, not a request of its own first.

A slot takes its next item once the consumer has received the last one
whole (worker_sdk.interleave). It sent that item's completion on its own
and then took: two round trips at every item's end, while a consumer fed by
that slot alone waited on an empty buffer. Now the take carries the
completion; a slot that must wait for its turn (a sibling reads) sends it
before it waits, so that it never waits holding an item its consumer
finished. Real server, real TensorFlow.
"""

import threading

import pytest

from worker_sdk import WorkQueue
from worker_sdk.client import Client

from .sliced_file import every_record, sliced_works

pytestmark = [pytest.mark.tf, pytest.mark.timeout(120)]


@pytest.fixture
def sent(monkeypatch):
    """Each take (with the completions it carried) and each completion sent on its own, in order."""
    seen = []
    take, complete, complete_many = Client.take, Client.complete, Client.complete_many
    lock = threading.Lock()

    def counted_take(self, job_id, request):
        with lock:
            seen.append(("take", len(request.complete)))
        return take(self, job_id, request)

    def counted(call):
        def send(self, *args, **kwargs):
            with lock:
                seen.append(("complete", 1))
            return call(self, *args, **kwargs)

        return send

    monkeypatch.setattr(Client, "take", counted_take)
    monkeypatch.setattr(Client, "complete", counted(complete))
    monkeypatch.setattr(Client, "complete_many", counted(complete_many))
    return seen


def test_one_slot_sends_no_completion_of_its_own_and_reads_every_record_once(sdk_env, tmp_path, sent):
    queue = WorkQueue(sliced_works(tmp_path, 6, 4), shuffle=False)
    records = list(queue.dataset(cycle_length=1).as_numpy_iterator())
    assert records == every_record(6, 4)
    marks = queue.watermarks()
    assert (marks["done"], marks["leased"], marks["pending"]) == (6, 0, 0)
    assert [kind for kind, _count in sent].count("complete") == 0, sent
    # Every completion rode a take: the takes that followed the first carried one each.
    assert sum(count for kind, count in sent if kind == "take") == 6, sent


def test_slots_that_wait_for_their_turn_still_acknowledge_every_item(sdk_env, tmp_path, sent):
    queue = WorkQueue(sliced_works(tmp_path, 6, 4), shuffle=False)
    records = sorted(queue.dataset(cycle_length=3).as_numpy_iterator())
    assert records == sorted(every_record(6, 4))
    marks = queue.watermarks()
    assert (marks["done"], marks["leased"], marks["pending"]) == (6, 0, 0)
    carried = sum(count for kind, count in sent if kind == "take")
    alone = sum(count for kind, count in sent if kind == "complete")
    assert carried + alone >= 6, sent
