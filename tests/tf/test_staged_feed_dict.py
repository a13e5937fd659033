"""feed_dict feeds placeholders of the staged subgraph with tensors evaluated each iteration."""

import numpy as np
import pytest
import tensorflow as tf

from worker_sdk.tf.staging import make_prefetch_hook, staged

from .graph_helpers import RUN, numbers, run_hooked, tf1

pytestmark = pytest.mark.tf


def test_a_placeholder_is_fed_a_fresh_value_for_every_element():
    graph = tf.Graph()
    with graph.as_default():
        step = tf1.placeholder(tf.int64, [], name="step")
        source = numbers(100)
        staged_value = staged(step * 10, feed_dict={step: source}, capacity=2)

    assert [int(v) for v in run_hooked(graph, staged_value, steps=5)] == [0, 10, 20, 30, 40]


def test_a_sparse_placeholder_is_fed_from_a_sparse_tensor():
    graph = tf.Graph()
    with graph.as_default():
        ids = tf1.sparse_placeholder(tf.int64, shape=[2, 4])
        n = numbers(100)
        source = tf.SparseTensor(indices=[[0, 0], [1, 3]], values=tf.stack([n, n + 1]), dense_shape=[2, 4])
        staged_sum = staged(tf.sparse.reduce_sum(ids), feed_dict={ids: source})

    sums = [int(v) for v in run_hooked(graph, staged_sum, steps=3)]

    assert sums == [1, 3, 5]


def test_the_end_of_the_fed_values_closes_the_stream():
    graph = tf.Graph()
    with graph.as_default():
        step = tf1.placeholder(tf.int64, [])
        source = numbers(3)
        staged_value = staged(step + 1, feed_dict={step: source})
    hook = make_prefetch_hook()
    with tf1.Session(graph=graph) as sess:
        hook.after_create_session(sess, None)
        try:
            taken = [int(sess.run(staged_value, options=RUN)) for _ in range(3)]
            with pytest.raises(tf.errors.OutOfRangeError):
                sess.run(staged_value, options=RUN)
        finally:
            hook.end(sess)

    assert taken == [1, 2, 3]


def test_feed_dict_values_must_be_tensors():
    with tf.Graph().as_default():
        step = tf1.placeholder(tf.int64, [])
        with pytest.raises(TypeError, match="must be a tf.Tensor"):
            staged(step * 2, feed_dict={step: np.int64(3)})
