"""The web app's ASGI front: Django's WSGI handler on a pool of threads, and the requests that wait, on the event loop.

A take that finds nothing, and the heartbeat of a record range, may wait on
the server (server/api/waits.py says when): a waiting request must hold no
thread and no database connection, or a few hundred idle workers would need
a few hundred of each. Django's own ASGI handler would give that, at twice
the CPU of every other request (a thread and a pooled connection per
request, and a hop between threads per sync middleware: bench/RESULTS.md).
So every request runs through Django's WSGI handler on a fixed pool of
threads, each keeping its database connection (and its prepared statements)
as a sync worker does, and only the waiting happens here:

1. The request body of a take or a heartbeat is read and kept.
2. It runs through Django. A view whose answer may wait offers a
   ``waits.Wait`` under the run's id, which this gateway passes in
   ``X-Shardline-Gateway`` (set here, never taken from a client).
3. The gateway then waits on the process's listener (server/waiting.py),
   with no thread and no connection, and runs the request again when woken
   or when a lease it saw is due to expire: until an answer needs no wait,
   or the request's wait is over, or the client went away (nothing is sent).
4. A wait that is over with nothing new is answered with the answer it has
   (saying to ask again at once): running the take again would find the
   same. Its repeat waits on from there without running (server/parking.py).
   A take woken by its job's end is answered so without running: at the end
   of a job every waiting worker wakes at once, and none needs a statement.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging

from a2wsgi import WSGIMiddleware

from worker_sdk import protocol

from . import body_limits, holders, memory, metrics, parking, waiting
from .api import waits
from .api.waits import GATEWAY_HEADER

log = logging.getLogger("shardline.leases")
# A take or a heartbeat body is small; a larger one runs without waiting.
MAX_KEPT_BODY = 1 << 20


class Gateway:
    """ASGI application: ``wsgi_app`` on ``threads`` threads, with waiting takes and heartbeats."""

    def __init__(self, wsgi_app, threads: int):
        self.inner = WSGIMiddleware(wsgi_app, workers=threads)
        self.runs = itertools.count(1)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.inner(scope, receive, send)
        # Revocations are announced on the listener: a process whose token cache
        # fills from any request listens from its first one (server/waiting.py).
        waiting.listener().start()
        # Never a client's run id, however spelt: the WSGI environ reads
        # x_shardline_gateway as x-shardline-gateway.
        headers = [(name, value) for name, value in scope["headers"] if name.replace(b"_", b"-") != GATEWAY_HEADER]
        limit = body_limits.limit(scope["method"], scope["path"])
        length = next((value for name, value in headers if name == b"content-length"), None)
        if length is not None and length.isdigit() and int(length) > limit:
            return await _too_large(send, limit)  # nothing of the body read
        if length is None and any(name == b"transfer-encoding" for name, _ in headers):
            # Chunked: its size shows only as it comes. Kept up to the limit
            # (the app gets it with its length, which Django needs to read it).
            chunks, size = await _read_chunks(receive, limit)
            if chunks is None:
                return await _too_large(send, limit)
            headers = [(n, v) for n, v in headers if n != b"transfer-encoding"] + [(b"content-length", b"%d" % size)]
            receive = _replay_chunks(chunks, receive)
        if scope["method"] != "POST" or not protocol.may_wait(scope["path"]):
            try:
                return await self.inner({**scope, "headers": headers}, receive, send)
            finally:
                if length is not None and length.isdigit() and int(length) >= memory.LARGE_BODY:
                    await memory.give_back()
        body, complete = await _read_body(receive)
        if not complete:  # too large to keep: once, as it is
            return await self.inner({**scope, "headers": headers}, _replay(body, receive), send)
        try:
            key = parking.key_of(scope["path"], headers, body)
        except RecursionError:  # JSON nested too deep to read: Django's parser answers it, unparked
            key = None
        loop = asyncio.get_running_loop()
        deadline = None
        gone = None  # the client's disconnect, awaited while waiting
        parked_takes = parking.parking()
        listener = waiting.listener()
        # A repeat of a take that waited for nothing new: wait on from its answer.
        entry = parked_takes.get(key, listener) if key is not None else None
        answer, wait, since, wake_at = (entry.answer, entry.wait, entry.since, entry.wake_at) if entry else (None,) * 4
        try:
            while True:
                if answer is None:
                    answer = _Answer()
                    since = listener.mark()  # what comes while the request runs counts too
                    run = waits.open_run(str(next(self.runs)))
                    try:
                        run_scope = {**scope, "headers": [*headers, (GATEWAY_HEADER, run.encode())]}
                        await self.inner(run_scope, _replay(body, None), answer.send)
                    finally:
                        wait = waits.taken(run)
                    if wait is not None and wait.holders:
                        holders.back(wait)  # a heartbeat: its holders came back
                    if wait is None or not wait.seconds:
                        # Nothing to wait for. A heartbeat with something to
                        # tell (a split, a give-back, a lost lease) is
                        # answered at once, and its holders are awaited as
                        # after a held one.
                        if key is not None:
                            parked_takes.drop(key)
                        if wait is not None:
                            holders.answered(wait)
                        return await answer.forward(send)
                    wake_at = None if wait.wake_by is None else loop.time() + wait.wake_by + 0.05
                if deadline is None:
                    deadline = loop.time() + wait.seconds
                left = deadline - loop.time()
                if left <= 0:
                    # Waited all it asked for, and nothing came that would change the answer.
                    if key is not None:
                        parked_takes.put(key, answer, wait, since, wake_at, loop.time())
                    holders.answered(wait)  # a heartbeat's: its holders' next one is awaited
                    return await answer.forward(send, {wait.answer: 0.0})
                timeout = left if wake_at is None else min(left, max(0.0, wake_at - loop.time()))
                if gone is None:
                    gone = loop.create_task(_disconnect(receive))
                if entry is not None:
                    parked_takes.enter(entry, loop.time())
                try:
                    with metrics.waiting_take():
                        woken = loop.create_task(
                            listener.wait(
                                wait.job, wait.waiting_on, timeout, wait.holders, since, wait.taker, wait.deferred
                            )
                        )
                        await asyncio.wait({woken, gone}, return_when=asyncio.FIRST_COMPLETED)
                        if gone.done():
                            woken.cancel()
                            holders.dropped(wait)  # a heartbeat's: its process may have died
                            return  # nobody to answer
                finally:
                    if entry is not None:
                        parked_takes.leave(entry, loop.time())
                        entry = None
                note = woken.result()
                if note == waiting.JOB_DONE and protocol.take_job(scope["path"]) is not None:
                    # The job is done: every take of it would say so, without a statement each.
                    if key is not None:
                        parked_takes.drop(key)
                    return await answer.forward(send, protocol.ENDED)
                if note is None and wake_at is not None and loop.time() >= wake_at and not wait.rerun:
                    # The expiry it saw has come; heartbeats may have moved it.
                    seconds = await parked_takes.recheck(wait.job)
                    if seconds is not None:
                        wake_at = loop.time() + seconds + 0.05
                        if key is not None:
                            parked_takes.moved(key, wake_at)
                        continue
                if note is not None or (wake_at is not None and loop.time() >= wake_at):
                    answer = None  # something came, or a lease expired: run again
        finally:
            if gone is not None and not gone.done():
                gone.cancel()


class _Answer:
    """A response captured from Django, to forward (or drop, and ask again)."""

    def __init__(self):
        self.start = None
        self.body = []

    async def send(self, message):
        if message["type"] == "http.response.start":
            self.start = message
        else:
            self.body.append(message.get("body", b""))

    async def forward(self, send, replace: dict | None = None):
        body = b"".join(self.body)
        headers = self.start["headers"]
        if replace:
            body = json.dumps({**json.loads(body), **replace}).encode()
            headers = [(n, v) for n, v in headers if n != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
        await send({**self.start, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _read_body(receive) -> tuple[bytes, bool]:
    """The request's body, and whether it is all there (False: more than MAX_KEPT_BODY, the rest unread)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks), True
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if not message.get("more_body", False):
            return b"".join(chunks), True
        if size > MAX_KEPT_BODY:
            return b"".join(chunks), False


async def _too_large(send, limit: int) -> None:
    body = json.dumps({"error": "too_large", "message": body_limits.message(limit)}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _read_chunks(receive, limit: int) -> tuple[list[bytes] | None, int]:
    """A chunked body's pieces and size; (None, size) as soon as it is larger than ``limit`` (the rest unread)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return chunks, size
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > limit:
            return None, size
        if not message.get("more_body", False):
            return chunks, size


def _replay_chunks(chunks: list[bytes], rest):
    """A ``receive`` that hands out ``chunks`` (each let go of once handed), then the client's own messages."""
    chunks.reverse()

    async def receive():
        if chunks:
            return {"type": "http.request", "body": chunks.pop(), "more_body": bool(chunks)}
        return await rest()

    return receive


def _replay(body: bytes, rest):
    """A ``receive`` that gives ``body`` first, then (for a body read only in part) the rest of the client's."""
    sent = False

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": rest is not None}
        if rest is None:
            return {"type": "http.disconnect"}
        return await rest()

    return receive


async def _disconnect(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
