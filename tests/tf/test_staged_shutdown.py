"""Sessions end cleanly with a full buffer: blocked producers are cancelled, nothing hangs."""

import threading

import pytest
import tensorflow as tf

from worker_sdk.tf.staging import make_prefetch_hook, staged

from ..support import wait_until
from .graph_helpers import RUN, numbers, tf1

pytestmark = pytest.mark.tf

TIMEOUT_S = 30


def endless_numbers():
    return numbers(10**9)


def producer_threads(stage_name):
    prefix = f"shardline-staged:{stage_name}:"
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def run_in_thread(graph, target):
    """Runs ``target`` with ``graph`` as default on a thread, so a hang fails the test."""
    failures = []

    def guarded():
        try:
            with graph.as_default():
                target()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the test thread
            failures.append(exc)

    thread = threading.Thread(target=guarded)
    thread.start()
    thread.join(TIMEOUT_S)
    assert not thread.is_alive(), "shutdown hung"
    if failures:
        raise failures[0]


def test_leaving_a_monitored_session_with_a_full_buffer_stops_every_producer():
    graph = tf.Graph()
    with graph.as_default():
        staged_number = staged(endless_numbers(), capacity=2, num_threads=3, name="full")
        size = graph.get_tensor_by_name("full/size:0")

    def session_with_full_buffer():
        with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
            assert int(sess.run(staged_number, options=RUN)) >= 0
            wait_until(lambda: sess.run(size) == 2, TIMEOUT_S, 0.01, "a full buffer")
            assert len(producer_threads("full")) == 4  # three producers and the watchdog

    run_in_thread(graph, session_with_full_buffer)

    assert producer_threads("full") == []


def test_leaving_a_monitored_session_by_an_exception_still_stops_the_producers():
    graph = tf.Graph()
    with graph.as_default():
        staged_number = staged(endless_numbers(), capacity=1, num_threads=2, name="aborted")

    def session_left_by_an_exception():
        with pytest.raises(KeyError):
            with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
                sess.run(staged_number, options=RUN)
                raise KeyError("the training loop failed")

    run_in_thread(graph, session_left_by_an_exception)

    # end() is not called on this path: closing the session cancels the
    # blocked puts and the producers exit by themselves.
    wait_until(lambda: not producer_threads("aborted"), TIMEOUT_S, 0.01, "the producers to exit")


def test_the_hook_end_cancels_blocked_puts_and_closes_the_buffer():
    graph = tf.Graph()
    with graph.as_default():
        staged_number = staged(endless_numbers(), capacity=2, name="ended")
        size = graph.get_tensor_by_name("ended/size:0")
    hook = make_prefetch_hook()
    with tf1.Session(graph=graph) as sess:
        hook.after_create_session(sess, None)
        wait_until(lambda: sess.run(size) == 2, TIMEOUT_S, 0.01, "a full buffer")

        run_in_thread(graph, lambda: hook.end(sess))

        assert producer_threads("ended") == []
        # What was buffered is still handed out, then the closed buffer says so.
        assert [int(sess.run(staged_number, options=RUN)) for _ in range(2)] == [0, 1]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(staged_number, options=RUN)
