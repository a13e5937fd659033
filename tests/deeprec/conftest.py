from pathlib import Path

import pytest

from ..sdk.conftest import run_python, sdk_env  # noqa: F401  (sdk_env: the SDK tests' environment fixture)

WORKER = str(Path(__file__).with_name("graph_worker.py"))


@pytest.fixture
def graph_worker(sdk_env):  # noqa: F811  (the fixture imported above)
    """``graph_worker(command, *args)``: runs tests/deeprec/graph_worker.py in a fresh interpreter; its read items."""

    def run(*args, env=None, check=True, timeout=120):
        result = run_python([WORKER, *args], {**sdk_env, **(env or {})}, timeout=timeout)
        if check:
            assert result.returncode == 0 and "finished" in result.stdout, (result.stdout, result.stderr[-3000:])
        result.items = [line[5:] for line in result.stdout.splitlines() if line.startswith("read ")]
        return result

    return run
