"""Graph-mode building blocks shared by the tests of worker_sdk/tf/staging/."""

import pytest
import tensorflow as tf

from worker_sdk.tf.staging import make_prefetch_hook

tf1 = tf.compat.v1
# Bounds every take: a regression that blocks fails with DeadlineExceeded
# instead of hanging the suite.
RUN = tf1.RunOptions(timeout_in_ms=20_000)


def numbers(count):
    """Graph-mode source of 0..count-1 that then raises OutOfRangeError."""
    return tf1.data.make_one_shot_iterator(tf.data.Dataset.range(count)).get_next()


def not_found_at(x, bad_values):
    """``x``, except that evaluating it raises NotFoundError for ``bad_values``."""
    bad = tf.reduce_any(tf.equal(x, tf.constant(bad_values, x.dtype)))
    ok = tf.cond(
        bad, lambda: tf.strings.length(tf.io.read_file("/nonexistent/shardline")) >= 0, lambda: tf.constant(True)
    )
    return x + tf.cast(ok, x.dtype) * 0


def run_hooked(graph, fetches, steps):
    """Runs ``fetches`` ``steps`` times in a plain session with the prefetch hook."""
    hook = make_prefetch_hook()
    with tf1.Session(graph=graph) as sess:
        hook.after_create_session(sess, None)
        try:
            return [sess.run(fetches, options=RUN) for _ in range(steps)]
        finally:
            hook.end(sess)


def take_until_closed(sess, tensor, limit):
    """Takes ints until the stream closes; fails if it is still open after ``limit``."""
    taken = []
    with pytest.raises(tf.errors.OutOfRangeError):
        for _ in range(limit + 1):
            taken.append(int(sess.run(tensor, options=RUN)))
    return taken
