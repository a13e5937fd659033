"""Idempotent takes: a repeated ``Idempotency-Key`` gets the first answer, not more items.

The SDK sends one key per take and the same key on each of the transport's
retries of it. Without this, a take whose answer was lost (a timeout after the
server committed, a dropped connection) would be sent again and lease more
items, while the items of the lost answer stayed leased to a worker that
never learns of them, heartbeated by nobody, until they expired.

The request's record is written by take.sql itself, with the leases it made,
so a keyed take costs what an unkeyed one does: one statement. A repeat fails
on the record's primary key (waiting for the first to commit if it has not),
which undoes the repeat's whole statement, and is answered from the record:
the leases it names that are still held, and the repeat's completions as the
first accepted them. A take that leased nothing keeps no record (a repeat
runs again: its completions are answered as accepted, nothing is leased
twice); one that needed more statements (an epoch boundary) stores its
answer when done; a repeat that arrives before
that is told to retry shortly, unless the first died on the way (its
database session is gone, or IN_PROGRESS_SECONDS passed: behind a pooler the
session outlives the server), when the leases it recorded are the answer.
Records are kept leases.REQUEST_KEY_TTL seconds; a repeat after that runs as
a new take.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Callable

from django.db import IntegrityError, connection, transaction
from rest_framework.utils.encoders import JSONEncoder

from .. import sql
from ..callers import SERVER, Caller
from ..errors import InvalidInput, RequestInProgress, ShardlineError
from . import leases

IN_PROGRESS_SECONDS = 60
KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
_RECORD_KEY = "shardline_take_request_pkey"


def check_key(key: str | None) -> str | None:
    """The key, or None for no key; InvalidInput when it is malformed."""
    if key and not KEY.fullmatch(key):
        raise InvalidInput("Idempotency-Key must be 1-64 characters of A-Z, a-z, 0-9, '-' and '_'")
    return key or None


def answer_once(
    job_id: int,
    key: str | None,
    completions: list[leases.Completion],
    take: Callable[[str | None], leases.TakeResult],
    render: Callable[[leases.TakeResult], dict],
    caller: Caller = SERVER,
) -> dict:
    """``render(take(key))`` for the first request with ``key`` on the job; the first's answer for its repeats.

    Keys are ``caller``'s own: the same key from another user is another request.

    A take that raises a domain error (the job was cancelled) keeps what it
    did before raising (the completions it carried) and drops its record: a
    repeat runs again. Without a key every request is answered anew.
    """
    key = check_key(key)
    if key is None:
        return render(take(None))
    try:
        # Inside a transaction (a test's), the repeat's failure must undo
        # only its own statement.
        with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
            result = take(key)
    except IntegrityError as exc:
        if getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) != _RECORD_KEY:
            raise
        return _answer_again(job_id, key, completions, render, caller)
    except ShardlineError:
        sql.run("release_request", {"job": job_id, "key": key, **caller.sql})
        raise
    body = render(result)
    if not result.leases:
        # Nothing to strand: a repeat may run as a new take (and must, when
        # the server waited and takes again under the same key).
        sql.run("release_request", {"job": job_id, "key": key, **caller.sql})
    elif not result.whole:
        answer = json.dumps(body, cls=JSONEncoder)
        sql.run("answer_request", {"job": job_id, "key": key, "answer": answer, **caller.sql})
    return body


def _answer_again(job_id: int, key: str, completions, render, caller: Caller) -> dict:
    rows = sql.run("stored_request", {"job": job_id, "key": key, **caller.sql})
    if not rows:
        # The first raised (its record was dropped) between our statement and this one.
        raise RequestInProgress("the first request with this Idempotency-Key has just failed; retry it")
    record = rows[0]
    if record.answer is not None:
        return json.loads(record.answer) if isinstance(record.answer, str) else record.answer
    if not record.whole and record.answering and record.age < IN_PROGRESS_SECONDS:
        raise RequestInProgress("the first request with this Idempotency-Key is still being answered; retry shortly")
    return render(leases.answer_again(job_id, key, completions, caller))
