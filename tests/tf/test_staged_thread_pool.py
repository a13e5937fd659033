"""Producers can run on a session inter-op pool; a stream id other than 0 only warns."""

import logging

import pytest
import tensorflow as tf

from worker_sdk.tf.staging import make_prefetch_hook, staged

from .graph_helpers import RUN, numbers, tf1

pytestmark = pytest.mark.tf


def config_with_pools(*sizes):
    config = tf1.ConfigProto()
    for size in sizes:
        config.session_inter_op_thread_pool.add(num_threads=size)
    return config


def take(graph, tensor, steps, config):
    hook = make_prefetch_hook()
    with tf1.Session(graph=graph, config=config) as sess:
        hook.after_create_session(sess, None)
        try:
            return [int(sess.run(tensor, options=RUN)) for _ in range(steps)]
        finally:
            hook.end(sess)


def test_producers_run_on_the_configured_inter_op_pool():
    graph = tf.Graph()
    with graph.as_default():
        source = numbers(10)
        staged_number = staged(source, use_stage_subgraph_thread_pool=True, stage_subgraph_thread_pool_id=1)

    assert take(graph, staged_number, 5, config_with_pools(2, 1)) == [0, 1, 2, 3, 4]


def test_a_pool_missing_from_the_session_config_is_reported_to_the_consumer():
    graph = tf.Graph()
    with graph.as_default():
        source = numbers(10)
        staged_number = staged(source, use_stage_subgraph_thread_pool=True, stage_subgraph_thread_pool_id=3)

    with pytest.raises(tf.errors.InvalidArgumentError, match="inter_op_thread_pool"):
        take(graph, staged_number, 1, config_with_pools(1))


def test_a_stage_subgraph_stream_id_warns_that_stock_tensorflow_has_one_stream(caplog):
    caplog.set_level(logging.WARNING, logger="worker_sdk.tf.staging")
    with tf.Graph().as_default():
        staged(tf.constant(1), stage_subgraph_stream_id=2)

    warnings = [r.getMessage() for r in caplog.records if "stage_subgraph_stream_id" in r.getMessage()]
    assert len(warnings) == 1
    assert "single stream" in warnings[0]
