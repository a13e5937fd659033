"""Step time with and without ``staged``: does staging hide input latency?

Each training step needs one input element that costs ``io`` ms to produce and
then ``compute`` ms of work on it.  Without staging the two run back to back,
so a step costs about ``io + compute``.  With ``staged`` a producer thread
prepares the next elements while the current step computes, so a step should
cost about ``max(io, compute)``, the ideal reported next to each measurement.

* input: a ``py_function`` that sleeps ``io`` ms (an I/O wait: storage or
  network, no CPU) and returns a 128x128 float32 batch;
* compute: a ``tf.while_loop`` of 128x128 matmuls, its iteration count
  calibrated at start-up so that it takes ``compute`` ms on this machine.

Both variants run in the same process, in alternating rounds, and the median
round is reported, so a slow phase of the machine affects both alike.

Usage::

    .venv/bin/python bench/staged.py [--compute-ms 20] [--steps 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worker_sdk.tf.staging import make_prefetch_hook, staged  # noqa: E402

tf1 = tf.compat.v1
SIZE = 128
WARMUP_STEPS = 5
CALIBRATION_ITERATIONS = 200


def input_element(io_ms):
    """One input element that takes ``io_ms`` of waiting to produce."""

    def produce():
        time.sleep(io_ms / 1000.0)
        return np.full((SIZE, SIZE), 0.5, dtype=np.float32)

    element = tf.py_function(produce, [], tf.float32)
    element.set_shape([SIZE, SIZE])
    return element


def compute(x, iterations):
    """``iterations`` matmuls on ``x``: the stand-in for a training step."""
    w = tf.constant(np.random.default_rng(0).standard_normal((SIZE, SIZE)).astype(np.float32) * 0.05)

    def body(i, acc):
        return i + 1, tf.tanh(tf.matmul(acc, w))

    _, out = tf.while_loop(lambda i, _: i < iterations, body, (tf.constant(0), x))
    return tf.reduce_sum(out)


def calibrate(compute_ms, steps):
    """Matmul iterations whose step takes ``compute_ms`` here, and that measured time.

    Measured the way the benchmark measures (a MonitoredSession step with no
    input cost) and refined a few times, so that ``io = compute`` holds for
    the real step rather than for a micro-benchmark.
    """
    graph = tf.Graph()
    with graph.as_default():
        iterations = tf1.placeholder(tf.int32, [])
        step = compute(tf.ones([SIZE, SIZE]), iterations)
        with tf1.Session() as sess:
            for _ in range(3):
                sess.run(step, {iterations: CALIBRATION_ITERATIONS})
            start = time.perf_counter()
            sess.run(step, {iterations: CALIBRATION_ITERATIONS})
            per_iteration_ms = (time.perf_counter() - start) * 1000.0 / CALIBRATION_ITERATIONS
    count = max(1, round(compute_ms / per_iteration_ms))
    for _ in range(3):
        measured = measure_compute_ms(count, steps)
        count = max(1, round(count * compute_ms / measured))
    return count, measure_compute_ms(count, steps)


def step_time_ms(io_ms, iterations, steps, use_staged):
    """Mean wall time of one step over ``steps`` steps, after a warm-up."""
    graph = tf.Graph()
    with graph.as_default():
        element = input_element(io_ms)
        if use_staged:
            element = staged(element, capacity=2)
        train_op = compute(element, iterations)
        hooks = [make_prefetch_hook()] if use_staged else []
        with tf1.train.MonitoredSession(hooks=hooks) as sess:
            for _ in range(WARMUP_STEPS):
                sess.run(train_op)
            start = time.perf_counter()
            for _ in range(steps):
                sess.run(train_op)
            return (time.perf_counter() - start) * 1000.0 / steps


def measure_compute_ms(iterations, steps):
    """What the calibrated compute actually costs, alone (io = 0, unstaged)."""
    return step_time_ms(0.0, iterations, steps, use_staged=False)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compute-ms", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    iterations, compute_ms = calibrate(args.compute_ms, args.steps)
    gpus = tf.config.list_physical_devices("GPU")
    print(
        f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
        f"{'GPU: ' + ', '.join(g.name for g in gpus) if gpus else 'CPU only'}; "
        f"TensorFlow {tf.__version__}, Python {platform.python_version()}"
    )
    print(
        f"compute: {iterations} matmuls of {SIZE}x{SIZE} per step, calibrated to "
        f"{compute_ms:.1f} ms; io set to 1x and 2x that; {args.rounds} rounds x "
        f"{args.steps} steps per variant, median round; staged(capacity=2, num_threads=1)"
    )

    rows = []
    for io_factor in (1, 2):
        io_ms = compute_ms * io_factor
        plain, staged_, alone = [], [], []
        for _ in range(args.rounds):
            alone.append(measure_compute_ms(iterations, args.steps))
            plain.append(step_time_ms(io_ms, iterations, args.steps, use_staged=False))
            staged_.append(step_time_ms(io_ms, iterations, args.steps, use_staged=True))
        compute_round = statistics.median(alone)
        ideal = max(io_ms, compute_round)
        rows.append((io_ms, compute_round, statistics.median(plain), statistics.median(staged_), ideal))

    header = (
        f"{'io ms':>7} {'compute ms':>11} {'plain step':>11} {'staged step':>12} "
        f"{'ideal':>8} {'plain/ideal':>12} {'staged/ideal':>13}"
    )
    print(header)
    print("-" * len(header))
    for io_ms, compute_ms, plain_ms, staged_ms, ideal in rows:
        print(
            f"{io_ms:>7.1f} {compute_ms:>11.1f} {plain_ms:>11.1f} {staged_ms:>12.1f} "
            f"{ideal:>8.1f} {plain_ms / ideal:>11.2f}x {staged_ms / ideal:>12.2f}x"
        )
    print("compute ms: the same step with io = 0, measured in the same rounds; ideal = max(io, compute)")


if __name__ == "__main__":
    main()
