"""Elements keep their order with one producer and are each taken exactly once with several."""

import threading

import pytest
import tensorflow as tf

from worker_sdk.tf.staging import make_prefetch_hook, staged

from .graph_helpers import RUN, numbers, take_until_closed, tf1

pytestmark = pytest.mark.tf


def test_one_producer_thread_keeps_the_order_of_the_input():
    with tf.Graph().as_default():
        staged_number = staged(numbers(200), capacity=4, num_threads=1)
        with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
            taken = take_until_closed(sess, staged_number, limit=200)

    assert taken == list(range(200))


def test_several_producer_threads_deliver_every_element_exactly_once():
    with tf.Graph().as_default():
        staged_number = staged(numbers(300), capacity=3, num_threads=4)
        with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
            taken = take_until_closed(sess, staged_number, limit=300)

    assert len(taken) == 300
    assert sorted(taken) == list(range(300))


def test_several_consumers_share_the_elements_without_duplicates():
    graph = tf.Graph()
    with graph.as_default():
        staged_number = staged(numbers(200), capacity=2, num_threads=2, num_clients=2)
    hook = make_prefetch_hook()
    per_consumer = [[], []]
    with tf1.Session(graph=graph) as sess:
        hook.after_create_session(sess, None)

        def consume(out):
            try:
                while True:
                    out.append(int(sess.run(staged_number, options=RUN)))
            except tf.errors.OutOfRangeError:
                pass

        consumers = [threading.Thread(target=consume, args=(out,)) for out in per_consumer]
        for consumer in consumers:
            consumer.start()
        for consumer in consumers:
            consumer.join(30)
        assert not any(c.is_alive() for c in consumers)
        hook.end(sess)

    assert sorted(per_consumer[0] + per_consumer[1]) == list(range(200))
