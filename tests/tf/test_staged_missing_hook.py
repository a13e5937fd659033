"""Taking without make_prefetch_hook() fails at once with an error that says so, never hangs."""

import time

import pytest
import tensorflow as tf

from worker_sdk.tf.staging import make_prefetch_hook, staged

from .graph_helpers import numbers, tf1

pytestmark = pytest.mark.tf

# Were the take to block, this turns the hang into DeadlineExceededError, which
# the assertions below reject.
RUN = tf1.RunOptions(timeout_in_ms=10_000)


def test_a_plain_session_without_the_hook_fails_on_the_first_take():
    graph = tf.Graph()
    with graph.as_default():
        staged_number = staged(numbers(5), name="features")
    with tf1.Session(graph=graph) as sess:
        started = time.monotonic()
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"make_prefetch_hook\(\)") as raised:
            sess.run(staged_number, options=RUN)
        elapsed = time.monotonic() - started

    assert "staged buffer features" in raised.value.message
    assert elapsed < 5.0


def test_a_monitored_session_without_the_hook_fails_on_the_first_take():
    with tf.Graph().as_default():
        staged_number = staged(numbers(5))
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"make_prefetch_hook\(\)"):
            with tf1.train.MonitoredTrainingSession() as sess:
                sess.run(staged_number, options=RUN)


def test_the_hook_of_another_session_does_not_count():
    graph = tf.Graph()
    with graph.as_default():
        staged_number = staged(numbers(5))
    hook = make_prefetch_hook()
    with tf1.Session(graph=graph) as hooked, tf1.Session(graph=graph) as unhooked:
        hook.after_create_session(hooked, None)
        try:
            assert int(hooked.run(staged_number, options=RUN)) == 0
            with pytest.raises(tf.errors.InvalidArgumentError, match=r"make_prefetch_hook\(\)"):
                unhooked.run(staged_number, options=RUN)
        finally:
            hook.end(hooked)
