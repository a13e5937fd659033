"""worker_sdk.ahead: what SyncLoader reads its batches through without loader processes.

It reads on a thread at most ``depth`` elements ahead of the consumer,
hands them over in order, raises its source's error after what was read
before it, and on close stops reading and returns what was read and never
consumed (a synchronous epoch gives those items back).
"""

import threading

import pytest

from tests.support import wait_until
from worker_sdk.ahead import Ahead


class Source:
    """An iterable that counts what was read from it, and can be held at an element until released."""

    def __init__(self, count: int, fail_at: int | None = None, hold_at: int | None = None):
        self.count, self.fail_at, self.hold_at = count, fail_at, hold_at
        self.read = 0
        self.closed = threading.Event()
        self.held = threading.Event()
        self.release = threading.Event()
        self.thread: str | None = None

    def __iter__(self):
        self.thread = threading.current_thread().name
        try:
            for i in range(self.count):
                if i == self.fail_at:
                    raise ValueError(f"bad record {i}")
                if i == self.hold_at:
                    self.held.set()
                    assert self.release.wait(10)
                self.read += 1
                yield i
        finally:
            self.closed.set()


@pytest.mark.timeout(30)
def test_every_element_comes_in_order_read_on_its_own_thread():
    source = Source(50)
    assert list(Ahead(source, depth=3, name="reader")) == list(range(50))
    assert source.thread == "reader" and source.closed.wait(5)


@pytest.mark.timeout(30)
def test_it_reads_no_more_than_depth_ahead_of_the_consumer():
    source = Source(100)
    ahead = Ahead(source, depth=2)
    assert next(ahead) == 0
    wait_until(lambda: source.read >= 4, 5, 0.01, "the reader to fill the buffer")
    # One consumed, two buffered, one in hand waiting for room: close()
    # returns everything read, so a reader that ran further would show here.
    assert ahead.close() == [1, 2, 3]  # the one in hand, read and never put, is returned too
    assert source.closed.wait(5) and source.read == 4


@pytest.mark.timeout(30)
def test_the_sources_error_comes_after_what_was_read_before_it():
    ahead = Ahead(Source(10, fail_at=3), depth=2)
    assert [next(ahead) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="bad record 3"):
        next(ahead)
    with pytest.raises(StopIteration):
        next(ahead)


@pytest.mark.timeout(30)
def test_close_waits_for_the_element_being_read_and_returns_it_with_the_rest():
    source = Source(10, hold_at=2)
    ahead = Ahead(source, depth=4)
    assert source.held.wait(5)  # elements 0 and 1 are buffered; 2 is being read
    closing = threading.Thread(target=lambda: result.append(ahead.close()))
    result = []
    closing.start()
    source.release.set()
    closing.join(10)
    # Element 2, read while close() waited, is returned: a read in flight (a
    # take) is waited for, not abandoned with its lease. Whatever else was
    # read before the stop took effect is returned too: nothing is lost.
    assert result[0][:3] == [0, 1, 2] and result[0] == list(range(source.read)) and source.closed.is_set()
    with pytest.raises(StopIteration):
        next(ahead)


@pytest.mark.timeout(30)
def test_depth_zero_reads_each_element_when_asked_on_the_consumers_thread():
    source = Source(5)
    ahead = Ahead(source, depth=0)
    assert next(ahead) == 0 and source.read == 1
    assert source.thread == threading.current_thread().name
    assert ahead.close() == [] and source.closed.is_set()
    with pytest.raises(StopIteration):
        next(ahead)
    with pytest.raises(ValueError, match="at least 0"):
        Ahead(source, depth=-1)
