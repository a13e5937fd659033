"""Tensors, SparseTensors, lists and dicts come back with the same structure and static shapes."""

import threading

import numpy as np
import pytest
import tensorflow as tf

from worker_sdk.tf.staging import staged

from .graph_helpers import numbers, run_hooked

pytestmark = pytest.mark.tf


def test_a_dict_of_dense_and_sparse_features_round_trips_with_static_shapes():
    graph = tf.Graph()
    with graph.as_default():
        n = numbers(10)
        ids = tf.SparseTensor(indices=[[0, 1], [2, 3]], values=tf.stack([n, n + 100]), dense_shape=[4, 5])
        dense = tf.reshape(tf.cast(tf.range(6), tf.float32) + tf.cast(n, tf.float32), [2, 3])
        features = {"ids": ids, "dense": dense, "label": tf.strings.as_string(n)}
        out = staged(features, capacity=2)

    assert set(out) == {"ids", "dense", "label"}
    assert isinstance(out["ids"], tf.SparseTensor)
    assert out["ids"].shape.as_list() == [4, 5]
    assert out["ids"].indices.shape.as_list() == [2, 2]
    assert out["dense"].shape.as_list() == [2, 3]
    assert out["label"].shape.as_list() == []

    values = run_hooked(graph, out, steps=3)
    for step, value in enumerate(values):
        np.testing.assert_array_equal(value["ids"].indices, [[0, 1], [2, 3]])
        np.testing.assert_array_equal(value["ids"].values, [step, step + 100])
        np.testing.assert_array_equal(value["ids"].dense_shape, [4, 5])
        np.testing.assert_allclose(value["dense"], np.arange(6).reshape(2, 3) + step)
        assert value["label"] == str(step).encode()


def test_a_list_in_gives_a_new_mutable_list_out():
    with tf.Graph().as_default():
        n = numbers(10)
        features = [n, n * 2]
        out = staged(features)
        out[0] = out[0] + 1

    assert isinstance(out, list)
    assert out is not features
    assert features[0] is n


def test_a_single_tensor_a_tuple_and_none_leaves_keep_their_structure():
    graph = tf.Graph()
    with graph.as_default():
        n = numbers(10)
        single = staged(n)
        nested = staged((n * 10, {"skip": None, "keep": [n * 100]}))

    assert isinstance(single, tf.Tensor)
    assert isinstance(nested, tuple)
    assert isinstance(nested[1]["keep"], list)
    assert nested[1]["skip"] is None

    ((_, tens, hundreds),) = run_hooked(graph, [single, nested[0], nested[1]["keep"][0]], steps=1)

    # Both stages pull from one source, so which number each gets is open;
    # the leaves of one element stay together.
    assert tens % 10 == 0
    assert hundreds == tens * 10


def test_partially_known_shapes_are_kept():
    with tf.Graph().as_default():
        n = numbers(10)
        rows = tf.fill(tf.stack([n + 1, 4]), n)
        out = staged(rows)

    assert out.shape.as_list() == [None, 4]


def test_control_dependencies_around_the_call_do_not_reach_the_take():
    produced = []
    lock = threading.Lock()

    def produce():
        with lock:
            produced.append(len(produced))
            return np.int64(produced[-1])

    graph = tf.Graph()
    with graph.as_default():
        value = tf.py_function(produce, [], tf.int64)
        with tf.control_dependencies([value]):
            out = staged(tf.identity(value), capacity=1)

    taken = [int(v) for v in run_hooked(graph, out, steps=4)]

    # Had the take inherited the dependency, each step would also produce.
    assert taken == [0, 1, 2, 3]
