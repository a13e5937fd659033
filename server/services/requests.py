"""Idempotent takes: a repeated ``Idempotency-Key`` gets the first answer, not more items.

The SDK sends one key per take and the same key on each of the transport's
retries of it. Without this, a take whose answer was lost (a timeout after the
server committed, a dropped connection) would be sent again and lease more
items, while the items of the lost answer stayed leased to a worker that
never learns of them, heartbeated by nobody, until they expired.

A key is claimed before the take runs (claim_request.sql), in the take's
transaction, so a repeat that arrives while the first is being answered
waits for it and gets its answer instead of taking again. Keys are kept
REQUEST_KEY_TTL seconds, well beyond the SDK's default retry window
(SHARDLINE_RETRY_SECONDS, 120 s); a repeat after that runs as a new take.
"""

from __future__ import annotations

import json
import re
from typing import Callable

from django.db import transaction
from rest_framework.utils.encoders import JSONEncoder

from .. import sql
from ..errors import InvalidInput, ShardlineError

REQUEST_KEY_TTL = 600
KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")


def answer_once(job_id: int, worker: str, key: str | None, answer: Callable[[], dict]) -> dict:
    """``answer()`` for the first request with ``key`` on the job; the stored answer for its repeats.

    The claim, the take and the stored answer are one transaction (one
    commit, as a take without a key): a repeat that arrives meanwhile waits
    on the claim's row and then reads the answer, and a server that dies
    mid-request leaves neither leases nor a claim behind. A take that raises
    a domain error (the job was cancelled) keeps what it did before raising
    (the completions it carried) and drops the claim: a repeat runs again.
    The answer is stored as the client receives it (rendered by DRF's JSON
    encoder), so a repeat holds the same values as the first.
    Without a key every request is answered anew.
    """
    if not key:
        return answer()
    if not KEY.fullmatch(key):
        raise InvalidInput("Idempotency-Key must be 1-64 characters of A-Z, a-z, 0-9, '-' and '_'")
    params = {"job": job_id, "key": key, "worker": worker, "ttl": REQUEST_KEY_TTL}
    with transaction.atomic():
        ((mine, stored),) = sql.run("claim_request", params)
        if not mine:
            if stored is None:
                ((stored,),) = sql.run("stored_answer", {"job": job_id, "key": key})
            return json.loads(stored) if isinstance(stored, str) else stored
        try:
            body = json.loads(json.dumps(answer(), cls=JSONEncoder))
        except ShardlineError as exc:
            failure = exc
            sql.run("release_request", {"job": job_id, "key": key})
        else:
            sql.run("answer_request", {"job": job_id, "key": key, "answer": json.dumps(body)})
            return body
    raise failure
