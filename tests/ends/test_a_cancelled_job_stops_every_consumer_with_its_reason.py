"""A job cancelled while its workers read stops every consumer shape with JobCancelledError, never as an end.

Each shape reads its own job (slowly) in its own process; once every one of
them has read a record, an admin cancels all the jobs. Every consumer must
then fail, naming the job and who cancelled it: a training script that ends
"normally" with part of its data unread is the failure this guards against.
TensorFlow turns any Python exception raised inside its ops into
``tf.errors.UnknownError``; the message still starts with the class name.
"""

import os
import re
import signal
import subprocess
import threading
import uuid

import pytest

from worker_sdk import WorkQueue

from .harness import hung_stacks, start_consumer, wait_for_line, write_files

SHAPES = [
    ("items", {}),
    ("lease", {}),
    ("take_eager", {}),
    ("take_graph", {}),
    ("input_dataset", {}),
    ("input_producer", {}),
    ("dataset", {"cycle": 2}),
    ("torch", {"loaders": 0, "reader": True}),
    ("torch", {"loaders": 2, "reader": True}),
]


def last_raised(stderr: str) -> str:
    """The last exception line of a traceback: what the script died of.

    An earlier one may be an ``OutOfRangeError``: with input_producer(), the
    session's reader sees the proxy queue close when its runner fails, and
    the MonitoredSession raises the runner's error while handling that one.
    """
    raised = [line for line in stderr.splitlines() if re.match(r"[\w.]+(Error|Exception): ", line)]
    return raised[-1] if raised else ""


@pytest.mark.tf
@pytest.mark.timeout(240)  # nine processes, six of them importing TensorFlow or PyTorch, on two cores
def test_every_consumer_shape_raises_job_cancelled_naming_who(sdk_env, tmp_path, live_api):
    pytest.importorskip("torch", reason="PyTorch is an optional dependency of the SDK tests")
    works = write_files(tmp_path, 80, lines=3)
    names = [f"cancel-{shape}-{i}-{uuid.uuid4().hex[:4]}" for i, (shape, _options) in enumerate(SHAPES)]
    children = [
        start_consumer(sdk_env, tmp_path, shape, name, works, cost=0.5, **options)
        for name, (shape, options) in zip(names, SHAPES)
    ]
    admin = live_api("admin")
    cancelled = {}

    def cancel_once_reading(name, child):
        # Each job is cancelled as soon as its consumer has read a record
        # (a fast shape could otherwise finish while slower ones start).
        try:
            wait_for_line(child, "read ", timeout=150)
            job = WorkQueue(works, seed=0, name=name, run=f"{sdk_env['SHARDLINE_RUN']}-r0").job
            cancelled[name] = admin.post(f"/api/v1/jobs/{job['id']}/cancel/").json()
        except Exception as exc:  # reported by the assertion below, naming the shape
            cancelled[name] = {"error": f"{type(exc).__name__}: {exc}"}

    try:
        threads = [threading.Thread(target=cancel_once_reading, args=pair) for pair in zip(names, children)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(cancelled.get(name, {}).get("state") == "cancelled" for name in names), cancelled
        wrong = []
        for name, (shape, options), child in zip(names, SHAPES, children):
            try:
                stdout, stderr = child.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{shape} {options} did not stop within 60 s of the cancel:\n{hung_stacks([child])}")
            said = f"job '{name}.{sdk_env['SHARDLINE_RUN']}-r0' was cancelled by live-admin-"
            if child.returncode == 0 or "end 0" in stdout:
                wrong.append(f"{shape} {options} ended normally after the cancel:\n{stdout[-1000:]}")
            elif "JobCancelledError" not in last_raised(stderr) or said not in last_raised(stderr):
                wrong.append(f"{shape} {options} did not say why it stopped:\n{stderr[-3000:]}")
        assert not wrong, "\n\n".join(wrong)
    finally:
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
