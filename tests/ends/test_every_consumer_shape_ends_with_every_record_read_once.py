"""Every way of reading a queue reaches the end of a job, with every record read exactly once.

Several processes start each job together and read it in one consumer shape
until it ends; they all reach the end at the same moment, while others still
hold the last items. Each shape once hung there or could (a DataLoader
waiting on a loader that held a finished item, tf.data's interleave not
reading while its input waited, input_producer's reader holding items that
another process waited for). Rounds: SHARDLINE_END_ROUNDS (default 3).
"""

import pytest

from .harness import ROUNDS, run_consumers

# (shape, processes, files, options): files > processes, so that at the end
# some processes wait while others still read.
PLAIN = [
    ("items", 3, 7, {}),
    ("lease", 3, 7, {}),
    ("two_threads", 3, 7, {}),
]
TF = [
    ("take_eager", 2, 5, {}),
    ("take_graph", 2, 5, {}),
    ("input_dataset", 2, 5, {}),
    ("input_producer", 2, 5, {}),
    ("dataset", 3, 7, {"cycle": 1}),
    ("dataset", 2, 7, {"cycle": 3}),
]
TORCH = [
    ("torch", 2, 5, {"loaders": 0, "reader": True}),
    ("torch", 2, 5, {"loaders": 1, "reader": True}),
    ("torch", 2, 7, {"loaders": 2, "reader": True}),
    ("torch", 2, 7, {"loaders": 2}),
    ("torch", 2, 9, {"loaders": 8, "reader": True}),
]


def ids(cases):
    return [
        f"{shape}-{processes}p" + "".join(f"-{k}{'' if v is True else v}" for k, v in options.items())
        for shape, processes, _files, options in cases
    ]


@pytest.mark.timeout(60 + 30 * ROUNDS)
@pytest.mark.parametrize("shape, processes, files, options", PLAIN, ids=ids(PLAIN))
def test_plain_python_consumers_end_together(sdk_env, tmp_path, shape, processes, files, options):
    run_consumers(sdk_env, tmp_path, shape, processes=processes, files=files, **options)


@pytest.mark.timeout(60 + 30 * ROUNDS)  # past the harness's own deadline, which shows every stack
def test_two_queues_read_in_lockstep_by_each_process_end_together(sdk_env, tmp_path):
    run_consumers(sdk_env, tmp_path, "two_queues", processes=3, files=5, queues=("a", "b"))


@pytest.mark.tf
@pytest.mark.timeout(90 + 40 * ROUNDS)  # each process imports TensorFlow (several seconds here)
@pytest.mark.parametrize("shape, processes, files, options", TF, ids=ids(TF))
def test_tensorflow_consumers_end_together(sdk_env, tmp_path, shape, processes, files, options):
    run_consumers(sdk_env, tmp_path, shape, processes=processes, files=files, seconds_per_round=40, **options)


@pytest.mark.timeout(90 + 40 * ROUNDS)  # loader processes start with every round
@pytest.mark.parametrize("shape, processes, files, options", TORCH, ids=ids(TORCH))
def test_torch_loaders_end_together(sdk_env, tmp_path, shape, processes, files, options):
    pytest.importorskip(
        "torch", reason="PyTorch is an optional dependency of the SDK tests (pip install torch==2.13.0)"
    )
    run_consumers(sdk_env, tmp_path, shape, processes=processes, files=files, seconds_per_round=40, **options)
