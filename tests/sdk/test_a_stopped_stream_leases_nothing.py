"""A consumer's stream that was stopped (``dataset()`` closing) leases nothing more: no take leaves it.

``dataset()``'s close stops every slot's stream and then waits for slots in
the middle of a request. A slot that took after the stop (its turn came, or
its look-ahead's take in flight came back with nothing) leased an item the
consumer would never receive, and that item went back failed, an attempt
used (found by review). Real server.
"""

import pytest

from worker_sdk import WorkQueue
from worker_sdk.queue_end import QueueExhausted

pytestmark = pytest.mark.timeout(60)


def test_a_stopped_stream_takes_nothing_in_any_of_its_takes(sdk_env, tmp_path):
    path = tmp_path / "records.csv"
    path.write_text("".join(f"{i}\n" for i in range(4)))
    queue = WorkQueue([f"{path}?start=0&end=2", f"{path}?start=2&end=4"], shuffle=False)
    stream = queue.consumers.stream(lag=None, tracks=True)
    first = stream.next()
    assert (first.start, first.end) == (0, 2)
    stream.stop()
    with pytest.raises(QueueExhausted, match="the consumer stopped"):
        stream.next()
    assert stream.try_next() is None
    assert stream.next_ahead(1) == []
    marks = queue.watermarks()
    assert (marks["leased"], marks["pending"]) == (1, 1), marks
