"""A put waiting longer than timeout_millis logs a warning naming the stage and keeps its element."""

import logging
import threading

import pytest
import tensorflow as tf

from worker_sdk.tf.staging import make_prefetch_hook, staged

from .graph_helpers import RUN, numbers, tf1

pytestmark = pytest.mark.tf


class WarningSignal(logging.Handler):
    """Sets an event when a warning containing ``needle`` is logged."""

    def __init__(self, needle):
        super().__init__(level=logging.WARNING)
        self.needle = needle
        self.seen = threading.Event()
        self.messages = []

    def emit(self, record):
        message = record.getMessage()
        if self.needle in message:
            self.messages.append(message)
            self.seen.set()


@pytest.fixture
def put_timeout_warnings():
    handler = WarningSignal("a put has waited more than")
    logger = logging.getLogger("worker_sdk.tf.staging")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def test_a_put_blocked_past_the_timeout_warns_and_its_element_is_still_delivered(put_timeout_warnings):
    graph = tf.Graph()
    with graph.as_default():
        source = numbers(100)
        staged_number = staged(source, capacity=1, timeout_millis=100, name="slow_consumer")
    hook = make_prefetch_hook()
    with tf1.Session(graph=graph) as sess:
        hook.after_create_session(sess, None)
        try:
            # Nobody takes: element 0 fills the buffer and element 1's put waits.
            assert put_timeout_warnings.seen.wait(10)
            taken = [int(sess.run(staged_number, options=RUN)) for _ in range(3)]
        finally:
            hook.end(sess)

    assert taken == [0, 1, 2]
    message = put_timeout_warnings.messages[0]
    assert "'slow_consumer'" in message
    assert "100 ms" in message
    assert "keeping the element" in message


def test_no_warning_while_puts_complete_within_the_timeout(put_timeout_warnings):
    graph = tf.Graph()
    with graph.as_default():
        source = numbers(30)
        staged_number = staged(source, capacity=4, timeout_millis=60_000)
    hook = make_prefetch_hook()
    with tf1.Session(graph=graph) as sess:
        hook.after_create_session(sess, None)
        try:
            taken = [int(sess.run(staged_number, options=RUN)) for _ in range(30)]
        finally:
            hook.end(sess)

    assert taken == list(range(30))
    assert put_timeout_warnings.messages == []
