"""In eager mode and tf.function, staged() turns a dataset or iterator into a prefetching iterator."""

import logging
import threading

import pytest
import tensorflow as tf

from worker_sdk.tf.staging import staged

from .graph_helpers import not_found_at

pytestmark = pytest.mark.tf


def numbers_failing_at(count, bad_values):
    return tf.data.Dataset.range(count).map(lambda x: not_found_at(x, bad_values))


class PullCounter:
    """A generator source that records how many elements were pulled from it."""

    def __init__(self, count):
        self.count = count
        self.pulled = 0
        self._pulled = threading.Condition()

    def __call__(self):
        for n in range(self.count):
            with self._pulled:
                self.pulled += 1
                self._pulled.notify_all()
            yield n

    def wait_until(self, pulled, timeout):
        with self._pulled:
            return self._pulled.wait_for(lambda: self.pulled >= pulled, timeout)


def test_a_dataset_becomes_an_iterator_over_the_same_elements():
    iterator = staged(tf.data.Dataset.range(20).map(lambda x: {"x": x, "sq": x * x}), capacity=3)

    elements = [(int(e["x"]), int(e["sq"])) for e in iterator]

    assert elements == [(n, n * n) for n in range(20)]


def test_the_iterator_prefetches_capacity_elements_ahead_of_the_consumer():
    source = PullCounter(50)
    dataset = tf.data.Dataset.from_generator(source, output_signature=tf.TensorSpec([], tf.int64))
    iterator = staged(dataset, capacity=4)

    assert int(next(iterator)) == 0
    # One taken, four more waiting in the buffer without being asked for.
    assert source.wait_until(1 + 4, timeout=10)
    assert int(next(iterator)) == 1
    assert source.wait_until(2 + 4, timeout=10)


def test_the_iterator_can_be_consumed_inside_a_tf_function():
    iterator = staged(tf.data.Dataset.range(10), capacity=2)

    @tf.function
    def train_step(it):
        return next(it) * 10

    assert [int(train_step(iterator)) for _ in range(4)] == [0, 10, 20, 30]


def test_staged_can_be_called_inside_a_tf_function():
    @tf.function
    def first_three(dataset):
        iterator = staged(dataset, capacity=2)
        return next(iterator) + next(iterator) * 10 + next(iterator) * 100

    assert int(first_three(tf.data.Dataset.range(5, 10))) == 5 + 60 + 700


def test_a_tf_data_iterator_is_accepted_as_the_source():
    source = iter(tf.data.Dataset.range(8))
    next(source)  # a partly consumed iterator continues where it is

    assert [int(x) for x in staged(source, capacity=2)] == list(range(1, 8))


def test_errors_that_are_not_closed_or_ignored_are_raised_by_next_with_their_class():
    iterator = staged(numbers_failing_at(10, [3]), capacity=2)

    taken = [int(next(iterator)) for _ in range(3)]
    with pytest.raises(tf.errors.NotFoundError, match="/nonexistent/shardline"):
        next(iterator)
    assert taken == [0, 1, 2]


@pytest.mark.parametrize(
    "closed", [tf.errors.NOT_FOUND, tf.errors.NotFoundError], ids=["error-code", "exception-class"]
)
def test_a_closed_exception_ends_the_iteration(closed):
    iterator = staged(numbers_failing_at(10, [4]), capacity=2, closed_exception_types=(closed, tf.errors.OUT_OF_RANGE))

    assert [int(x) for x in iterator] == [0, 1, 2, 3]


def test_an_ignored_exception_skips_the_element_with_one_warning_line(caplog):
    caplog.set_level(logging.WARNING, logger="worker_sdk.tf.staging")
    iterator = staged(numbers_failing_at(8, [2, 5]), capacity=2, ignored_exception_types=(tf.errors.NotFoundError,))

    assert [int(x) for x in iterator] == [0, 1, 3, 4, 6, 7]
    skipped = [r.getMessage() for r in caplog.records if "skipped an element" in r.getMessage()]
    assert len(skipped) == 2
    assert all("\n" not in m and "NotFoundError" in m for m in skipped)


def test_ignored_exceptions_also_apply_inside_a_tf_function():
    iterator = staged(numbers_failing_at(8, [1]), capacity=2, ignored_exception_types=(tf.errors.NOT_FOUND,))

    @tf.function
    def take(it):
        return next(it)

    assert [int(take(iterator)) for _ in range(3)] == [0, 2, 3]


def test_with_custom_types_other_errors_are_still_raised():
    iterator = staged(numbers_failing_at(8, [1]), ignored_exception_types=(tf.errors.DATA_LOSS,))

    assert int(next(iterator)) == 0
    with pytest.raises(tf.errors.UnknownError, match="NotFoundError"):
        next(iterator)


def test_eager_tensors_are_rejected_with_a_pointer_to_datasets():
    with pytest.raises(TypeError, match="tf.data.Dataset"):
        staged(tf.constant([1, 2, 3]))
