"""The buffer never holds more than `capacity` elements: producers wait for space."""

import threading

import numpy as np
import pytest
import tensorflow as tf

from worker_sdk.tf.staging import make_prefetch_hook, staged

from .graph_helpers import RUN, tf1

pytestmark = pytest.mark.tf

# How long to watch for a production that must not happen.  It bounds a
# negative check, so it cannot be replaced by waiting on a condition.
QUIET_PERIOD_S = 0.5


class ProductionCounter:
    """A py_function body that numbers the elements it produces."""

    def __init__(self):
        self._produced = threading.Condition()
        self.count = 0

    def __call__(self):
        with self._produced:
            value = self.count
            self.count += 1
            self._produced.notify_all()
        return np.int64(value)

    def wait_until(self, count, timeout):
        with self._produced:
            return self._produced.wait_for(lambda: self.count >= count, timeout)


@pytest.mark.parametrize("capacity,num_threads", [(3, 1), (2, 3)])
def test_producers_stop_at_capacity_until_the_consumer_takes(capacity, num_threads):
    counter = ProductionCounter()
    graph = tf.Graph()
    with graph.as_default():
        produced = tf.py_function(counter, [], tf.int64)
        staged_number = staged(produced, capacity=capacity, num_threads=num_threads)
    hook = make_prefetch_hook()
    with tf1.Session(graph=graph) as sess:
        hook.after_create_session(sess, None)
        try:
            # `capacity` elements in the buffer plus one blocked put per thread.
            ceiling = capacity + num_threads
            assert counter.wait_until(ceiling, timeout=10)
            assert not counter.wait_until(ceiling + 1, timeout=QUIET_PERIOD_S)
            assert counter.count == ceiling

            taken = [int(sess.run(staged_number, options=RUN)) for _ in range(2)]
            assert counter.wait_until(ceiling + 2, timeout=10)
            assert not counter.wait_until(ceiling + 3, timeout=QUIET_PERIOD_S)
            assert counter.count == ceiling + 2
        finally:
            hook.end(sess)

    if num_threads == 1:
        assert taken == [0, 1]
    assert len(set(taken)) == 2
