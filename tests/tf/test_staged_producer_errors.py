"""Any other producer error reaches the consumer, in order, and never as a silent stop or a hang."""

import threading

import numpy as np
import pytest
import tensorflow as tf

from worker_sdk.tf.staging import make_prefetch_hook, staged

from .graph_helpers import RUN, not_found_at, numbers, tf1

pytestmark = pytest.mark.tf


def hooked_session(graph):
    hook = make_prefetch_hook()
    sess = tf1.Session(graph=graph)
    hook.after_create_session(sess, None)
    return hook, sess


def test_the_consumer_takes_the_elements_before_the_failure_then_the_error():
    graph = tf.Graph()
    with graph.as_default():
        staged_number = staged(not_found_at(numbers(10), [3]), capacity=4)
    hook, sess = hooked_session(graph)
    try:
        taken = [int(sess.run(staged_number, options=RUN)) for _ in range(3)]
        with pytest.raises(tf.errors.UnknownError) as raised:
            sess.run(staged_number, options=RUN)
        # Production stopped with the error: the buffer is closed behind it.
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(staged_number, options=RUN)
    finally:
        hook.end(sess)
        sess.close()

    assert taken == [0, 1, 2]
    assert "a producer failed with NotFoundError" in raised.value.message
    assert "/nonexistent/shardline" in raised.value.message
    assert "'staged'" in raised.value.message


def test_an_invalid_argument_error_keeps_its_class():
    graph = tf.Graph()
    with graph.as_default():
        x = numbers(10)
        checked = tf.debugging.assert_less(x, tf.constant(2, tf.int64), message="record too large")
        with tf.control_dependencies([checked]):
            staged_number = staged(tf.identity(x))
    hook, sess = hooked_session(graph)
    try:
        taken = [int(sess.run(staged_number, options=RUN)) for _ in range(2)]
        with pytest.raises(tf.errors.InvalidArgumentError, match="record too large"):
            sess.run(staged_number, options=RUN)
    finally:
        hook.end(sess)
        sess.close()

    assert taken == [0, 1]


def test_a_consumer_waiting_on_an_empty_buffer_is_woken_by_the_error():
    consumer_waiting = threading.Event()

    def produce(n):
        # Element 1 fails only once the consumer is on its way into the take
        # that finds the buffer empty.
        if int(n) == 1:
            consumer_waiting.wait(10)
            raise ValueError("element 1 is corrupt")
        return np.int64(n)

    graph = tf.Graph()
    with graph.as_default():
        value = tf.py_function(produce, [numbers(5)], tf.int64)
        staged_number = staged(value)
    hook, sess = hooked_session(graph)
    try:
        first = int(sess.run(staged_number, options=RUN))
        consumer_waiting.set()
        # A hang would surface as DeadlineExceededError, not this error.
        with pytest.raises(tf.errors.InvalidArgumentError, match="element 1 is corrupt"):
            sess.run(staged_number, options=RUN)
    finally:
        consumer_waiting.set()
        hook.end(sess)
        sess.close()

    assert first == 0


def test_every_consumer_receives_the_error():
    graph = tf.Graph()
    with graph.as_default():
        staged_number = staged(not_found_at(numbers(10), [0]), num_clients=2)
    hook, sess = hooked_session(graph)
    errors = []

    def consume():
        try:
            sess.run(staged_number, options=RUN)
        except tf.errors.OpError as exc:
            errors.append(exc)

    try:
        consumers = [threading.Thread(target=consume) for _ in range(2)]
        for consumer in consumers:
            consumer.start()
        for consumer in consumers:
            consumer.join(30)
        assert not any(c.is_alive() for c in consumers)
    finally:
        hook.end(sess)
        sess.close()

    assert len(errors) == 2
    assert all(isinstance(e, tf.errors.UnknownError) and "NotFoundError" in e.message for e in errors)


def test_monitored_session_reraises_the_original_error_with_its_class_on_exit():
    with tf.Graph().as_default():
        staged_number = staged(not_found_at(numbers(10), [3]), capacity=2)
        taken = []
        with pytest.raises(tf.errors.NotFoundError, match="/nonexistent/shardline"):
            with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
                for _ in range(10):
                    taken.append(int(sess.run(staged_number, options=RUN)))

    assert taken == [0, 1, 2]


def test_a_should_stop_loop_raises_the_original_error_instead_of_stopping_silently():
    with tf.Graph().as_default():
        staged_number = staged(not_found_at(numbers(10), [3]), capacity=2)
        taken = []
        with pytest.raises(tf.errors.NotFoundError):
            with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
                while not sess.should_stop():
                    taken.append(int(sess.run(staged_number, options=RUN)))

    # should_stop() may raise before the buffered elements are taken; those
    # that were taken came in order.
    assert taken == list(range(len(taken)))
    assert len(taken) <= 3
