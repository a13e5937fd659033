import time

import pytest

from tests.support import free_port
from worker_sdk import ConnectionError as ShardlineConnectionError
from worker_sdk import WorkQueue


def test_unreachable_server_raises_connection_error_after_retrying():
    queue = WorkQueue(["a.csv"], url=f"http://127.0.0.1:{free_port()}", token="x", retry_seconds=1.5)
    started = time.monotonic()
    with pytest.raises(ShardlineConnectionError) as raised:
        list(queue.items())
    elapsed = time.monotonic() - started
    message = str(raised.value)
    assert "gave up on POST" in message and "attempts" in message and "SHARDLINE_RETRY_SECONDS" in message
    # It retried for the whole budget: a long jittered wait is cut to the
    # deadline, never a reason to give up before it.
    assert elapsed >= 1.5
    assert isinstance(raised.value, ConnectionError)  # also the built-in class
