"""An Idempotency-Key is scoped by user and job: another user sending the same key gets leases of its own.

Without it, a worker user who saw another's key (in a log line) would be
answered with the other's leases and their fencing tokens.
"""

import uuid

from .trust import live_tokens, new_job, take


def test_the_same_key_from_another_user_is_another_request(live_server_url, test_database_url):
    first, second = live_tokens(live_server_url, test_database_url, [("worker", None, None), ("worker", None, None)])
    job = new_job(first, f"key-{uuid.uuid4().hex[:8]}")
    key = {"Idempotency-Key": "shared-key-1"}
    mine = take(first, job["id"], count=2, headers=key).json()["leases"]
    theirs = take(second, job["id"], worker="w2", count=2, headers=key).json()["leases"]
    assert len(mine) == len(theirs) == 2
    assert not {lease["id"] for lease in mine} & {lease["id"] for lease in theirs}
    assert not {lease["token"] for lease in mine} & {lease["token"] for lease in theirs}
    # Each user's repeat is still answered with its own first answer.
    assert take(first, job["id"], count=2, headers=key).json()["leases"] == mine
    assert take(second, job["id"], worker="w2", count=2, headers=key).json()["leases"] == theirs
