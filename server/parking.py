"""Waiting takes that ask again for what they waited for: parked on the listener, not run again.

A worker at the end of a job asks again as soon as its wait runs out (the
SDK waits 20 s a take). If nothing that concerns it happened meanwhile (no
notification on its job since its take last ran, no lease of the job due to
expire), running the take again would find what it found then. So the
gateway answers the end of a wait with the answer it has, and a repeat of
the same take (same path, Authorization and body, no completions) in the
same process waits on the listener from where that answer was made, without
running: waiting workers cost the database nothing while nothing happens,
and each thing that happens costs one take per worker it wakes. When the
earliest lease expiry a take saw comes (heartbeats move expiries without a
notification), one statement per process and job (``recheck``) says whether
a lease really expired; only then do the takes run.

What a run does besides answering is done here for all the parked takes of
the process at once, every SHARDLINE_TOKEN_CACHE_SECONDS, in two statements:
their tokens are checked as authentication checks them (a revoked or expired
token, a deactivated user: the takes of that token run again, and are
refused), and their workers' last_seen moves on, so the dashboard shows them
alive. A revocation does not wait for that: announced to every process
(server/waiting.py), it drops the token's parked takes at once, wakes their
waits to run (and be refused), and keeps a take of that token that was
waiting when it came from being parked after. With the token cache off (0),
every take runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.conf import settings

from worker_sdk import protocol

from . import metrics

log = logging.getLogger("shardline.waiting")

# An entry nobody has used for this long is dropped (its worker went away).
UNUSED_SECONDS = 120.0
# Revoked key hashes remembered, so that a take that was waiting when its
# token was revoked is not parked after (far more than are revoked within a wait).
REVOKED_KEPT = 1024
# The refreshes run on one thread of their own, which keeps its database
# connection between them: a connection per refresh would cost its set-up
# statements every time, more than the two statements themselves.
_refresher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shardline-parking")


@dataclass(frozen=True)
class Key:
    path: str
    authorization: bytes
    body: bytes
    worker: str = field(compare=False)  # the body's, as parsed


@dataclass
class Parked:
    """The last answer of a waiting take, and where the stream of notifications stood when it was made."""

    answer: object  # the gateway's captured response
    wait: object  # its waits.Wait
    since: int  # the listener's mark before the run that made the answer
    wake_at: float | None  # loop time of the earliest lease expiry it saw: a run is due then
    job: int
    worker: str
    digest: str  # the token's key hash
    used_at: float
    parked: int = 0  # requests waiting on it now


def key_of(path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> Key | None:
    """The key of a take that may be parked: a wait, no completions or started leases, a token; None for any other."""
    if settings.SHARDLINE_TOKEN_CACHE_SECONDS <= 0 or protocol.take_job(path) is None:
        return None
    authorization = next((value for name, value in headers if name == b"authorization"), b"")
    if not authorization.lower().startswith(b"token "):
        return None
    try:
        take = protocol.TakeRequest.parse(json.loads(body), settings.SHARDLINE_MAX_TAKE)
    except ValueError:  # not JSON, or not a take: Django answers it, unparked
        return None
    if take.complete or take.started or not take.wait:
        return None  # it changes leases (completes them, says they started): it runs
    return Key(path, authorization, body, take.worker)


class Parking:
    """The parked takes of one server process (one per event loop; see ``parking()``)."""

    def __init__(self):
        self._entries: dict[Key, Parked] = {}
        self._task: asyncio.Task | None = None
        self._rechecks: dict[int, asyncio.Future] = {}
        self._revoked: dict[str, None] = {}  # insertion-ordered: the oldest is dropped first

    def revoked(self, digest: str | None) -> None:
        """A token was revoked (None: any may have been, while the listener was away): its parked takes run again.

        Running, each is refused by authentication; those waiting now are woken to.
        """
        from . import waiting

        if digest is not None:
            self._revoked[digest] = None
            if len(self._revoked) > REVOKED_KEPT:
                del self._revoked[next(iter(self._revoked))]
        for key, entry in list(self._entries.items()):
            if digest is None or entry.digest == digest:
                del self._entries[key]
                waiting.listener().wake_job(entry.job)

    def get(self, key: Key, listener) -> Parked | None:
        """The parked answer for ``key``, if nothing came since it was made that its take would wake for.

        Its ``wake_at`` may have passed: the gateway then rechecks before it waits.
        """
        entry = self._entries.get(key)
        if entry is None:
            return None
        wait = entry.wait
        if listener.changed_since(wait.job, wait.waiting_on, entry.since, wait.taker, wait.deferred):
            del self._entries[key]  # work came, or the job changed: run
            return None
        return entry

    async def recheck(self, job: int) -> float | None:
        """Seconds until the job's earliest live lease expires; None when one has (or none is held): run the take.

        One statement per process and job however many takes ask at once.
        """
        pending = self._rechecks.get(job)
        if pending is None:
            pending = asyncio.get_running_loop().run_in_executor(_refresher, _next_expiry, job)
            self._rechecks[job] = pending
            pending.add_done_callback(lambda _done: self._rechecks.pop(job, None))
        try:
            seconds = await asyncio.shield(pending)
        except Exception as exc:  # the database is away: the take runs and says so
            log.warning("lease expiry not rechecked", extra={"event": "parking_failed", "reason": repr(exc)})
            return None
        return seconds if seconds is not None and seconds > 0 else None

    def moved(self, key: Key, wake_at: float) -> None:
        """A recheck found the leases alive: the parked answer stands until ``wake_at``."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.wake_at = wake_at

    def put(self, key: Key, answer, wait, since: int, wake_at: float | None, now: float) -> None:
        from .services.accounts import hash_key

        token = key.authorization.split(None, 1)[1].decode("latin1").strip()
        entry = self._entries.get(key)
        if entry is None:
            digest = hash_key(token)
            if digest in self._revoked:
                return  # revoked while this take waited: its repeat runs, and is refused
            entry = Parked(answer, wait, since, wake_at, wait.job, key.worker, digest, now)
            self._entries[key] = entry
        entry.answer, entry.wait, entry.since, entry.wake_at, entry.used_at = answer, wait, since, wake_at, now
        self._start()

    def drop(self, key: Key) -> None:
        self._entries.pop(key, None)

    def enter(self, entry: Parked, now: float) -> None:
        entry.parked += 1
        entry.used_at = now
        metrics.TAKES_PARKED.inc()

    def leave(self, entry: Parked, now: float) -> None:
        entry.parked -= 1
        entry.used_at = now

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._refresh(), name="shardline-parking")

    async def _refresh(self) -> None:
        from . import waiting

        loop = asyncio.get_running_loop()
        while self._entries:
            await asyncio.sleep(settings.SHARDLINE_TOKEN_CACHE_SECONDS)
            now = loop.time()
            for key in [k for k, e in self._entries.items() if not e.parked and now - e.used_at > UNUSED_SECONDS]:
                del self._entries[key]
            entries = list(self._entries.items())
            if not entries:
                break
            try:
                live = await loop.run_in_executor(_refresher, _refresh_in_thread, [e for _k, e in entries])
            except Exception as exc:  # the database is away: the takes run again and say so
                log.warning("parked takes not refreshed", extra={"event": "parking_failed", "reason": repr(exc)})
                live = set()
            for key, entry in entries:
                if entry.digest not in live and self._entries.get(key) is entry:
                    del self._entries[key]
                    waiting.listener().wake_job(entry.job)


async def off_loop(function, *args):
    """Runs ``function(*args)`` on the thread of this process's waiting requests' statements (its one connection)."""
    return await asyncio.get_running_loop().run_in_executor(_refresher, function, *args)


def _next_expiry(job: int) -> float | None:
    from django.db import close_old_connections

    from .services import heartbeats

    close_old_connections()
    return heartbeats.next_expiry(job)


def _refresh_in_thread(entries: list[Parked]) -> set[str]:
    """Marks the parked workers seen and returns the token digests that still authenticate (one statement each)."""
    from django.db import close_old_connections

    from .services import accounts, heartbeats

    close_old_connections()  # one that failed (the database restarted) is replaced
    waiting_now = {(e.job, e.worker) for e in entries if e.parked}
    if waiting_now:
        heartbeats.seen_waiting(sorted(waiting_now))
    return accounts.live_digests({e.digest for e in entries})


_parkings: dict[int, Parking] = {}


def parking() -> Parking:
    """This event loop's parked takes."""
    from . import waiting

    loop = asyncio.get_running_loop()
    found = _parkings.get(id(loop))
    if found is None:
        found = _parkings[id(loop)] = Parking()
        waiting.listener().watch_tokens(found.revoked)
    return found
