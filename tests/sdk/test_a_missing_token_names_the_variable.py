"""The SDK without a token says which variable gives it one and how to make a key.

Found: ``AuthError: Authentication credentials were not provided``, naming
neither SHARDLINE_TOKEN nor create_token.
"""

import pytest

from worker_sdk import WorkQueue
from worker_sdk.errors import AuthError


def test_no_token_names_shardline_token_and_create_token(live_server_url, monkeypatch):
    monkeypatch.delenv("SHARDLINE_TOKEN", raising=False)
    queue = WorkQueue(["/a"], name="no-token", url=live_server_url)
    with pytest.raises(AuthError) as raised:
        next(iter(queue.items()))
    assert "SHARDLINE_TOKEN" in str(raised.value) and "create_token" in str(raised.value)
