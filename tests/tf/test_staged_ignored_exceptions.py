"""An ignored exception skips its element with one warning line and production goes on."""

import logging

import pytest
import tensorflow as tf

from worker_sdk.staging import make_prefetch_hook, staged

pytestmark = pytest.mark.tf

tf1 = tf.compat.v1
RUN = tf1.RunOptions(timeout_in_ms=20_000)


def numbers(count):
    return tf1.data.make_one_shot_iterator(tf.data.Dataset.range(count)).get_next()


def not_found_at(x, bad_values):
    bad = tf.reduce_any(tf.equal(x, tf.constant(bad_values, x.dtype)))
    ok = tf.cond(bad, lambda: tf.strings.length(tf.io.read_file("/nonexistent/shardline")) >= 0,
                 lambda: tf.constant(True))
    return x + tf.cast(ok, x.dtype) * 0


@pytest.mark.parametrize("ignored", [tf.errors.NOT_FOUND, tf.errors.NotFoundError],
                         ids=["error-code", "exception-class"])
def test_ignored_errors_skip_their_elements_and_log_one_warning_line_each(ignored, caplog):
    caplog.set_level(logging.WARNING, logger="worker_sdk.staging")
    with tf.Graph().as_default():
        staged_number = staged(not_found_at(numbers(12), [2, 7]), capacity=2,
                               ignored_exception_types=(ignored,))
        with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
            taken = []
            with pytest.raises(tf.errors.OutOfRangeError):
                for _ in range(13):
                    taken.append(int(sess.run(staged_number, options=RUN)))

    assert taken == [0, 1, 3, 4, 5, 6, 8, 9, 10, 11]
    skipped = [r for r in caplog.records if "skipped an element" in r.getMessage()]
    assert len(skipped) == 2
    for record in skipped:
        assert record.levelno == logging.WARNING
        assert "\n" not in record.getMessage()
        assert "NotFoundError" in record.getMessage()
        assert "'staged'" in record.getMessage()


def test_errors_that_are_not_ignored_still_reach_the_consumer():
    with tf.Graph().as_default():
        staged_number = staged(not_found_at(numbers(12), [3]),
                               ignored_exception_types=(tf.errors.DATA_LOSS,))
        with pytest.raises(tf.errors.NotFoundError):
            with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
                taken = []
                with pytest.raises(tf.errors.UnknownError, match="NotFoundError"):
                    for _ in range(12):
                        taken.append(int(sess.run(staged_number, options=RUN)))
                assert taken == [0, 1, 2]
