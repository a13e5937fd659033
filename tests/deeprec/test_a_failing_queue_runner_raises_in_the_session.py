"""A take that fails inside input_producer()'s queue runner raises in the session, never hangs it (issue 28).

Found with DeepRec's tests: a JobSpecConflictError in the runner killed its
thread and ``dequeue_many`` waited for good. Now the proxy's dequeue raises
the runner's error, with queue runners started by hand (no Coordinator) and
under MonitoredSession.
"""

import uuid

import pytest

pytestmark = pytest.mark.tf


@pytest.fixture
def conflicting(live_api, sdk_env):
    """A queue name whose job already exists with other works: every take is a JobSpecConflictError."""
    name = f"runner_error_{uuid.uuid4().hex[:8]}"
    job = {"name": f"{name}.{sdk_env['SHARDLINE_RUN']}", "works": ["/other"], "shuffle": False}
    assert live_api("worker").post("/api/v1/jobs/", job).status_code == 201
    return name


def test_a_failed_runner_raises_in_a_plain_session(graph_worker, conflicting):
    result = graph_worker("runner-error", "--name", conflicting, "/a", "/b", timeout=90)
    assert "raised UnknownError" in result.stdout and "JobSpecConflictError" in result.stdout, result.stdout


def test_a_failed_runner_raises_in_a_monitored_session(graph_worker, conflicting):
    result = graph_worker("runner-error", "--monitored", "--name", conflicting, "/a", "/b", check=False, timeout=90)
    assert result.returncode == 1 and "finished" not in result.stdout
    assert "JobSpecConflictError" in result.stderr and "already exists with a different works" in result.stderr
