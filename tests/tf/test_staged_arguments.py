"""Arguments are validated when staged() is called, before any session exists."""

import pytest
import tensorflow as tf

from worker_sdk.tf import staging
from worker_sdk.tf.staging import make_prefetch_hook, staged

from .graph_helpers import tf1

pytestmark = pytest.mark.tf


def test_the_module_exports_exactly_the_public_api():
    assert staging.__all__ == ["staged", "make_prefetch_hook"]
    assert isinstance(make_prefetch_hook(), tf1.train.SessionRunHook)


@pytest.mark.parametrize("argument", ["capacity", "num_threads", "num_clients", "timeout_millis"])
def test_counts_below_one_are_rejected(argument):
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=argument):
            staged(tf.constant(1), **{argument: 0})


def test_non_integer_counts_are_rejected():
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="capacity"):
            staged(tf.constant(1), capacity=2.5)


def test_exception_types_accept_codes_and_classes_but_nothing_else():
    with tf.Graph().as_default():
        staged(
            tf.constant(1),
            closed_exception_types=(tf.errors.OUT_OF_RANGE, tf.errors.DataLossError),
            ignored_exception_types=(tf.errors.NOT_FOUND,),
        )
        with pytest.raises(TypeError, match="closed_exception_types"):
            staged(tf.constant(1), closed_exception_types=("OUT_OF_RANGE",))
        with pytest.raises(ValueError, match="ignored_exception_types"):
            staged(tf.constant(1), ignored_exception_types=(99,))


def test_an_exception_type_cannot_be_both_closed_and_ignored():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="both closed and ignored"):
            staged(
                tf.constant(1),
                closed_exception_types=(tf.errors.OUT_OF_RANGE,),
                ignored_exception_types=(tf.errors.OutOfRangeError,),
            )


def test_features_without_any_tensor_are_rejected():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="no tensor"):
            staged([None])


def test_a_dataset_in_a_v1_graph_is_rejected_with_a_pointer_to_get_next():
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="get_next"):
            staged(tf.data.Dataset.range(3))
