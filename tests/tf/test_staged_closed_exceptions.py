"""A closed exception ends its producer; the buffer closes after the last one and drains first."""

import pytest
import tensorflow as tf

from worker_sdk.tf.staging import make_prefetch_hook, staged

from .graph_helpers import RUN, not_found_at, numbers, take_until_closed, tf1

pytestmark = pytest.mark.tf


def test_end_of_input_closes_the_buffer_after_the_consumer_drains_it():
    graph = tf.Graph()
    with graph.as_default():
        # Capacity above the input size: the producer ends (OutOfRange) and the
        # buffer closes while every element is still in it.
        staged_number = staged(numbers(3), capacity=5)
    hook = make_prefetch_hook()
    with tf1.Session(graph=graph) as sess:
        hook.after_create_session(sess, None)
        taken = [int(sess.run(staged_number, options=RUN)) for _ in range(3)]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(staged_number, options=RUN)
        hook.end(sess)

    assert taken == [0, 1, 2]


@pytest.mark.parametrize(
    "closed", [tf.errors.NOT_FOUND, tf.errors.NotFoundError], ids=["error-code", "exception-class"]
)
def test_a_closed_exception_type_given_as_code_or_class_ends_the_stream(closed):
    with tf.Graph().as_default():
        staged_number = staged(not_found_at(numbers(10), [4]), closed_exception_types=(closed,))
        with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
            taken = take_until_closed(sess, staged_number, limit=10)

    assert taken == [0, 1, 2, 3]


def test_the_buffer_stays_open_until_every_producer_thread_has_ended():
    with tf.Graph().as_default():
        # One of the two threads ends at element 5; the other goes on to the
        # end of the input, so only element 5 is missing.
        staged_number = staged(
            not_found_at(numbers(60), [5]),
            num_threads=2,
            capacity=2,
            closed_exception_types=(tf.errors.NOT_FOUND, tf.errors.OUT_OF_RANGE),
        )
        with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
            taken = take_until_closed(sess, staged_number, limit=60)

    assert sorted(taken) == [n for n in range(60) if n != 5]


def test_a_should_stop_loop_ends_cleanly_when_the_input_is_exhausted():
    with tf.Graph().as_default():
        staged_number = staged(numbers(25), capacity=3)
        taken = []
        with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
            while not sess.should_stop():
                taken.append(int(sess.run(staged_number, options=RUN)))

    assert taken == list(range(25))
