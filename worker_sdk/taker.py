"""One lease per call of ``take()``, taken ahead by a ``LookAhead`` started in the calling process."""

from __future__ import annotations

import os
import threading

from .look_ahead import LookAhead
from .protocol import Lease
from .queue_end import QueueExhausted, exhausted_message
from .stream import Stream


class Taker:
    """One lease per call, for ``take()`` (eager, or a graph op run once per step), ``depth`` taken ahead.

    Depth 0 is ``stream.timed_next()`` (the stream has ``lag=1``: each call
    acknowledges the lease before). Deeper, a ``LookAhead`` over the stream
    (``lag=None``), started at the first call in the calling process, not
    when the op is built: a graph may be built before a fork. ``close()``
    gives back what was taken ahead and not started.
    """

    def __init__(self, stream: Stream, depth: int, most: int | None = None):
        self.stream = stream
        self._depth, self._most = depth, most
        self._ahead: LookAhead | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()
        # One call at a time: a LookAhead has one consumer (queue runners
        # may run the op on several threads).
        self._calls = threading.Lock()

    def next(self) -> Lease:
        """The next lease; QueueExhausted at the end, as ``Stream.next()``."""
        if self._depth == 0:
            return self.stream.timed_next()
        with self._calls:
            with self._lock:
                if self._ahead is None or self._pid != os.getpid():
                    self._ahead, self._pid = LookAhead(self.stream, self._depth, most=self._most), os.getpid()
                ahead = self._ahead
            meter = self.stream.meter
            meter.wait()
            try:
                return next(ahead)
            except StopIteration:
                raise QueueExhausted(exhausted_message(self.stream.name)) from None
            finally:
                meter.got()

    def close(self) -> None:
        with self._lock:
            ahead, self._ahead = (self._ahead, None) if self._pid == os.getpid() else (None, None)
        if ahead is not None:
            ahead.close()
