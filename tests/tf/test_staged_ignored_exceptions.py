"""An ignored exception skips its element with one warning line and production goes on."""

import logging

import pytest
import tensorflow as tf

from worker_sdk.tf.staging import make_prefetch_hook, staged

from .graph_helpers import RUN, not_found_at, numbers, take_until_closed, tf1

pytestmark = pytest.mark.tf


@pytest.mark.parametrize(
    "ignored", [tf.errors.NOT_FOUND, tf.errors.NotFoundError], ids=["error-code", "exception-class"]
)
def test_ignored_errors_skip_their_elements_and_log_one_warning_line_each(ignored, caplog):
    caplog.set_level(logging.WARNING, logger="worker_sdk.tf.staging")
    with tf.Graph().as_default():
        staged_number = staged(not_found_at(numbers(12), [2, 7]), capacity=2, ignored_exception_types=(ignored,))
        with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
            taken = take_until_closed(sess, staged_number, limit=12)

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
        staged_number = staged(not_found_at(numbers(12), [3]), ignored_exception_types=(tf.errors.DATA_LOSS,))
        with pytest.raises(tf.errors.NotFoundError):
            with tf1.train.MonitoredTrainingSession(hooks=[make_prefetch_hook()]) as sess:
                taken = []
                with pytest.raises(tf.errors.UnknownError, match="NotFoundError"):
                    for _ in range(12):
                        taken.append(int(sess.run(staged_number, options=RUN)))
                assert taken == [0, 1, 2]
