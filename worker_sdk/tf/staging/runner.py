"""Graph mode: the producer threads of a stage in a session, and the hook that starts and stops them."""

from __future__ import annotations

import logging
import threading
import time

import tensorflow as tf

from ..internals import session_closed
from .errors import describe, error_code
from .graph import claim, stages_of

logger = logging.getLogger(__name__)

# Upper bound on how long the hook's end() waits for a producer that is blocked
# upstream of the buffer (for example in a reader); such a producer is stopped
# by the session's own close, which follows end() in MonitoredSession.
_END_JOIN_TIMEOUT_S = 5.0
# Watchdog polling bounds for timeout_millis: fine enough for short timeouts in
# tests, coarse enough to cost nothing with the 5 minute default.
_WATCHDOG_MIN_INTERVAL_S = 0.01
_WATCHDOG_MAX_INTERVAL_S = 1.0


class _InFlightPut:
    __slots__ = ("started", "warned")

    def __init__(self, started):
        self.started = started
        self.warned = False


class _StageRunner:
    """The producer threads (and a put watchdog) of one stage in one session."""

    def __init__(self, stage, session, coord):
        graph = session.graph
        self.stage = stage
        self.session = session
        self._coord = coord
        self._put = graph.get_operation_by_name(stage.put_op)
        self._put_error = graph.get_operation_by_name(stage.put_error_op)
        self._error_code = graph.get_tensor_by_name(stage.error_code_feed)
        self._error_message = graph.get_tensor_by_name(stage.error_message_feed)
        self._close = graph.get_operation_by_name(stage.close_op)
        self._cancel = graph.get_operation_by_name(stage.cancel_op)
        self._size = graph.get_tensor_by_name(stage.size_tensor)
        self._start = graph.get_operation_by_name(stage.start_op)
        self._feed_keys = [graph.get_tensor_by_name(n) for n in stage.feed_keys]
        self._feed_values = [graph.get_tensor_by_name(n) for n in stage.feed_values]
        self._run_options = None
        if stage.inter_op_thread_pool is not None:
            self._run_options = tf.compat.v1.RunOptions(inter_op_thread_pool=stage.inter_op_thread_pool)

        self._stop = threading.Event()
        self._finished = threading.Event()
        # Guards _live, _failed and _in_flight, which producers and the
        # watchdog update concurrently.
        self._lock = threading.Lock()
        self._live = stage.num_threads
        self._failed = False
        self._in_flight = {}
        self._threads = [
            threading.Thread(
                target=self._produce, args=(index,), daemon=True, name=f"shardline-staged:{stage.name}:producer-{index}"
            )
            for index in range(stage.num_threads)
        ]
        self._watchdog = threading.Thread(
            target=self._watch, daemon=True, name=f"shardline-staged:{stage.name}:watchdog"
        )

    # -- lifecycle ---------------------------------------------------------

    def start(self):
        # The token goes in before any take can run: after_create_session
        # returns before MonitoredSession hands the session to the caller.
        self.session.run(self._start)
        for thread in self._threads:
            thread.start()
        self._watchdog.start()

    def stop(self):
        """Stops the producers, cancelling puts blocked on a full buffer."""
        self._stop.set()
        self._finished.set()
        try:
            self.session.run(self._cancel)
        except (tf.errors.OpError, RuntimeError):
            # The session is already closing; that cancels the puts as well.
            pass
        deadline = time.monotonic() + _END_JOIN_TIMEOUT_S
        for thread in self._threads + [self._watchdog]:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            logger.info(
                "staged %r: %d producer(s) still blocked upstream of the buffer; they stop when the session closes",
                self.stage.name,
                len(alive),
            )

    def alive(self):
        return any(t.is_alive() for t in self._threads)

    # -- producers ---------------------------------------------------------

    def _should_stop(self):
        return self._stop.is_set() or (self._coord is not None and self._coord.should_stop())

    def _shutting_down(self, exc):
        if self._should_stop():
            return True
        # Cancellation only comes from closing the session or cancelling the
        # buffer, i.e. from a shutdown, never from the data.
        if isinstance(exc, tf.errors.CancelledError):
            return True
        # A RuntimeError from run() on a closed session is how a shutdown
        # without end() shows up here.
        return isinstance(exc, RuntimeError) and session_closed(self.session)

    def _produce(self, index):
        try:
            while not self._should_stop():
                try:
                    feed = None
                    if self._feed_keys:
                        values = self.session.run(self._feed_values, options=self._run_options)
                        feed = dict(zip(self._feed_keys, values))
                    with self._lock:
                        self._in_flight[index] = _InFlightPut(time.monotonic())
                    try:
                        self.session.run(self._put, feed_dict=feed, options=self._run_options)
                    finally:
                        with self._lock:
                            self._in_flight.pop(index, None)
                except Exception as exc:  # noqa: BLE001 - classified below
                    if self._shutting_down(exc):
                        return
                    if self.stage.closed.matches(exc):
                        logger.debug("staged %r: producer %d finished (%s)", self.stage.name, index, describe(exc))
                        return
                    if self.stage.ignored.matches(exc):
                        logger.warning("staged %r: skipped an element: %s", self.stage.name, describe(exc))
                        continue
                    self._fail(exc)
                    return
        finally:
            self._producer_exited()

    def _fail(self, exc):
        with self._lock:
            first = not self._failed
            self._failed = True
        self._stop.set()
        if not first:
            return
        logger.error(
            "staged %r: a producer failed; the consumer receives the elements "
            "buffered before the failure, then this error: %s",
            self.stage.name,
            describe(exc),
        )
        if self._coord is not None:
            # As a QueueRunner does: MonitoredSession then re-raises the original
            # exception from should_stop() and close(), with its own class, and
            # recovers from preemption errors by recreating the session.
            self._coord.request_stop(exc)
        message = f"staged '{self.stage.name}': a producer failed with {describe(exc)}"
        feed = {self._error_code: error_code(exc), self._error_message: message}
        try:
            for _ in range(self.stage.num_clients):
                self.session.run(self._put_error, feed_dict=feed)
        except (tf.errors.OpError, RuntimeError):
            # The buffer was cancelled or the session closed while the markers
            # waited for space: nobody is left to take them.
            pass

    def _producer_exited(self):
        with self._lock:
            self._live -= 1
            last = self._live == 0
        if not last:
            return
        self._finished.set()
        if self._stop.is_set() and not self._failed:
            return
        try:
            # Without cancelling: the consumer drains what is buffered, then
            # gets OutOfRangeError.
            self.session.run(self._close)
        except (tf.errors.OpError, RuntimeError):
            pass

    # -- put watchdog ------------------------------------------------------

    def _watch(self):
        timeout_s = self.stage.timeout_millis / 1000.0
        interval = min(max(timeout_s / 4, _WATCHDOG_MIN_INTERVAL_S), _WATCHDOG_MAX_INTERVAL_S)
        while not self._finished.wait(interval):
            now = time.monotonic()
            with self._lock:
                overdue = [put for put in self._in_flight.values() if not put.warned and now - put.started >= timeout_s]
            if not overdue:
                continue
            try:
                size = self.session.run(self._size)
            except (tf.errors.OpError, RuntimeError):
                return
            if size < self.stage.capacity:
                # Still computing the element, not waiting for space.
                continue
            with self._lock:
                for put in overdue:
                    put.warned = True
            for _ in overdue:
                logger.warning(
                    "staged %r: a put has waited more than %d ms on the full buffer "
                    "(capacity %d); keeping the element and waiting for a consumer",
                    self.stage.name,
                    self.stage.timeout_millis,
                    self.stage.capacity,
                )


class _PrefetchHook(tf.compat.v1.train.SessionRunHook):
    """Starts the producers of every ``staged`` buffer of the session's graph.

    Producers start in ``after_create_session`` and stop in ``end``, which
    cancels puts blocked on a full buffer.  With ``MonitoredSession`` a new
    session (after a preemption) gets fresh producers.  For a plain ``Session``
    call ``after_create_session(session, None)`` after initialising variables
    and ``end(session)`` before closing it.
    """

    def __init__(self):
        # Guards _runners: end() may run on another thread than the one that
        # created the session.
        self._lock = threading.Lock()
        self._runners = []

    def after_create_session(self, session, coord):
        stages = stages_of(session.graph)
        if not stages:
            logger.warning("make_prefetch_hook(): the session's graph has no staged() features")
        started = []
        for stage in stages:
            if not claim(session, stage.name):
                logger.warning(
                    "staged %r: producers already running in this session; ignoring a second prefetch hook", stage.name
                )
                continue
            runner = _StageRunner(stage, session, coord)
            runner.start()
            started.append(runner)
        with self._lock:
            # Runners of sessions closed without end() exit on their own.
            self._runners = [r for r in self._runners if r.alive()] + started

    def end(self, session):
        with self._lock:
            mine = [r for r in self._runners if r.session is session]
            self._runners = [r for r in self._runners if r.session is not session]
        for runner in mine:
            runner.stop()


def make_prefetch_hook():
    """Returns the session hook that runs the producers of ``staged`` buffers.

    Add it to every session that takes from a ``staged`` buffer, e.g.
    ``MonitoredTrainingSession(hooks=[make_prefetch_hook()])``.  Without it the
    first take fails at once with an error saying so.

    Returns:
      A ``tf.compat.v1.train.SessionRunHook``.
    """
    return _PrefetchHook()
