"""Takes that wait for work: one LISTEN connection per server process, and the waiters it wakes.

A take that finds nothing to lease (and is not at its end) may wait
server-side, up to the seconds its request asks for, instead of the worker
polling. While it waits it is a coroutine on the process's event loop
holding a future: no thread, no database connection. One connection per
process listens on the channel ``shardline_job``, where the database
announces what a waiting take could be waiting for (server/sql/schema.sql):

    <job>:pending:<n>   n items became pending (a failure, an expired lease
                        taken back, a split's remainder, a restore...)
    <job>:done:<n>      n items finished while nothing was pending: the job,
                        or a worker's wait for those leases, may have ended
    <job>:state:<s>     the job's state changed (done, cancelled, paused...)
    <job>:split:<worker> a split was asked of a lease of this worker: its
                        heartbeat, if it waits on the server, answers at once
    <job>:refused:<worker> the holder refused a split asked for this worker:
                        its take asks another holder
    <job>:waiting:<consumer> a consumer holding leases of the job started or
                        stopped waiting: the leases worth waiting for changed

Each wakes only the waiters it may concern, so that a few hundred waiting
workers cost the database O(events), not O(workers): ``pending`` wakes as
many waiters as items came (oldest first), ``done`` counts down each
waiter's ``waiting_on`` (the leases its take said were worth waiting for)
and wakes those that reach zero (after DONE_GRACE: the job's end, which
needs no statement, may follow), ``state`` wakes every waiter of the job,
``split`` the heartbeat that holds the lease, ``refused`` the take that asked.
A deferred take (a slow worker near a job's end) is woken by ``state``
alone: it runs again on its own every half second.
A woken waiter takes again; one that was too late waits again.

The same connection listens on ``shardline_token``, where a revocation is
announced (services/accounts.py): the process forgets the token at once
(its cache, and the parked takes, server/parking.py, which watch here), so
a revoked token stops working in every process when the revocation commits.
From the first request a process serves, not its first take: its token
cache fills from any request. After (re)connecting, what was announced
meanwhile is unknown: every token is forgotten.

A request marks its place in the stream of notifications before it runs
(``mark``), and its wait, which starts after it ran, first looks at what
came meanwhile: a notification between a take's statement and its wait is
not lost. Notifications are not queued for a connection that is down: after
(re)connecting, every waiter is woken once to take again. A waiter also wakes
at its deadline (the earliest lease expiry, or the end of its request's
wait), so a lost notification delays, never strands, a worker.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("shardline.waiting")

CHANNEL = "shardline_job"
# Notifications kept for waits that start after their request ran (see mark).
RECENT = 4096
RECONNECT_SECONDS = (0.5, 1.0, 2.0, 5.0)
# Seconds a take whose leases worth waiting for have all finished waits on
# for its job's end before it runs again. The request that finished the last
# of them marks the job done in the same commit (a completion) or moments
# after (a take), and every take woken by that is answered without a
# statement (server/gateway.py). Woken at once, each would run to look for
# the end itself, all at the same moment (bench/RESULTS.md, "The end of a
# job"). When the job goes on, the take runs again after this.
DONE_GRACE = 0.05
# What woke a waiter: a notification's (kind, value), or ANY (a reconnection,
# too many to replay, a wake of the whole job) when it cannot say which.
Note = tuple[str, str]
ANY: Note = ("any", "")
JOB_DONE: Note = ("state", "done")
# Connection keywords of Django's psycopg settings that a plain connection takes.
_CONNINFO = (
    "dbname",
    "user",
    "password",
    "host",
    "port",
    "connect_timeout",
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "options",
    "application_name",
    "service",
    "passfile",
    "target_session_attrs",
)


@dataclass(eq=False)
class Waiter:
    job: int
    waiting_on: int  # 'done' notifications to count down before waking (0: only pending and state wake it)
    woken: asyncio.Future
    # A heartbeat's holders (worker names): a split asked of one of their leases wakes it.
    holders: frozenset[str] = field(default_factory=frozenset)
    # A take's worker: a split asked for it and refused wakes it.
    taker: str | None = None
    # Its leases worth waiting for have all finished: it wakes after DONE_GRACE, or at once at the job's end.
    due: bool = False
    # A deferred take (a slow worker near the end): only its job's state
    # wakes it (it runs again on its own every half second). A pending item
    # that woke it was one an idle worker's take did not get woken for.
    deferred: bool = False


class Listener:
    """The process's LISTEN connection and its waiters (one per event loop; see ``listener()``)."""

    def __init__(self):
        self._waiters: dict[int, list[Waiter]] = {}
        self._task: asyncio.Task | None = None
        # Every notification in order (and every reconnection, as job None):
        # a request marks its place before it runs, and a wait that starts
        # after it ran sees what came meanwhile.
        self._seq = 0
        self._recent: collections.deque = collections.deque(maxlen=RECENT)
        # Called with a revoked token's key hash (None: any token may have been).
        self._token_watchers: list[Callable[[str | None], None]] = []

    def start(self) -> None:
        """Listens from now on (the first request of a process calls it: see the module docstring)."""
        self._start()

    def watch_tokens(self, watcher: Callable[[str | None], None]) -> None:
        """Calls ``watcher(key_hash)`` for each token revoked from now on, ``watcher(None)`` after a reconnection."""
        self._token_watchers.append(watcher)

    def token_revoked(self, digest: str | None) -> None:
        """Forgets a revoked token (None: every token) in this process: its next use is checked in the database."""
        from .services import accounts  # models: imported once Django is set up (server/asgi.py imports this first)

        accounts.forget(digest)
        for watcher in self._token_watchers:
            watcher(digest)

    def mark(self) -> int:
        """Where the stream of notifications stands: ``wait(since=mark())`` also sees those that come after."""
        self._start()
        return self._seq

    async def wait(
        self,
        job: int,
        waiting_on: int,
        timeout: float,
        holders: frozenset[str] = frozenset(),
        since: int | None = None,
        taker: str | None = None,
        deferred: bool = False,
    ) -> Note | None:
        """Waits until a notification concerns this waiter (one since ``since`` included) or ``timeout`` seconds pass.

        The notification that woke it (ANY when it cannot tell), or None at the timeout.
        """
        self._start()
        waiter = Waiter(job, waiting_on, asyncio.get_running_loop().create_future(), holders, taker, deferred=deferred)
        if since is not None:
            came = self._came_since(waiter, since)
            if came is not None and came[0] != "done":
                return came
            if came is not None:  # what it waited for ended meanwhile; the job's end may follow
                self._wake_after_grace(waiter, came)
        self._waiters.setdefault(job, []).append(waiter)
        try:
            return await asyncio.wait_for(waiter.woken, timeout)
        except TimeoutError:
            return None
        finally:
            # Also on cancellation (the client went away): nothing stays behind.
            waiters = self._waiters.get(job, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._waiters.pop(job, None)

    def changed_since(
        self, job: int, waiting_on: int, since: int, taker: str | None = None, deferred: bool = False
    ) -> bool:
        """Whether a take's wait of ``job`` would have been woken by what came after ``since`` (see ``wait``)."""
        return self._came_since(Waiter(job, waiting_on, None, frozenset(), taker, deferred=deferred), since) is not None

    def _came_since(self, waiter: Waiter, since: int) -> Note | None:
        """The first notification since ``since`` that concerns ``waiter``; the job's end before any other."""
        oldest = self._recent[0][0] if self._recent else self._seq + 1
        if since + 1 < oldest:  # more came than are kept: take again
            return ANY
        came = None
        for seq, job, kind, value in self._recent:
            if seq > since and (job is None or (job == waiter.job and _concerns(waiter, kind, value))):
                note = ANY if job is None else (kind, value)
                if note == JOB_DONE:
                    return note
                came = came or note
        return came

    def _wake_after_grace(self, waiter: Waiter, note: Note) -> None:
        if not waiter.due:
            waiter.due = True
            asyncio.get_running_loop().call_later(DONE_GRACE, _wake, waiter, note)

    def notify(self, payload: str) -> None:
        """Wakes the waiters a notification concerns (see the module docstring)."""
        try:
            job_text, kind, value = payload.split(":", 2)
            job = int(job_text)
        except ValueError:
            log.warning("unreadable notification", extra={"event": "notify_unreadable"})
            return
        self._seq += 1
        self._recent.append((self._seq, job, kind, value))
        waiters = [w for w in self._waiters.get(job, []) if not w.woken.done()]
        if kind == "pending":  # as many takes as there are new items, oldest first
            waiters = [w for w in waiters if not w.holders and not w.deferred][: max(1, int(value))]
        for waiter in waiters:
            if not _concerns(waiter, kind, value):
                continue
            if kind == "done":
                self._wake_after_grace(waiter, (kind, value))
            else:
                waiter.woken.set_result((kind, value))

    def wake_job(self, job: int) -> None:
        """Wakes every waiter of ``job`` in this process: each takes again (a token's parked takes were dropped)."""
        for waiter in self._waiters.get(job, []):
            if not waiter.woken.done():
                waiter.woken.set_result(ANY)

    def _wake_all(self) -> None:
        self._seq += 1
        self._recent.append((self._seq, None, "all", ""))
        for waiters in self._waiters.values():
            for waiter in waiters:
                if not waiter.woken.done():
                    waiter.woken.set_result(ANY)

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._listen(), name="shardline-listen")

    async def _listen(self) -> None:
        import psycopg
        from asgiref.sync import sync_to_async

        from .services.accounts import TOKEN_CHANNEL

        attempt = 0
        while True:
            try:
                params = await sync_to_async(_connection_params, thread_sensitive=False)()
                async with await psycopg.AsyncConnection.connect(**params, autocommit=True) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    await connection.execute(f"LISTEN {TOKEN_CHANNEL}")
                    attempt = 0
                    self._wake_all()  # whatever happened while not listening
                    self.token_revoked(None)
                    async for note in connection.notifies():
                        if note.channel == TOKEN_CHANNEL:
                            self.token_revoked(note.payload)
                        else:
                            self.notify(note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away: wake everyone, listen again
                self._wake_all()
                pause = RECONNECT_SECONDS[min(attempt, len(RECONNECT_SECONDS) - 1)]
                attempt += 1
                log.warning(
                    "listen connection lost; reconnecting",
                    extra={"event": "listen_lost", "reason": type(exc).__name__},
                )
                await asyncio.sleep(pause)


def _wake(waiter: Waiter, note: Note) -> None:
    if not waiter.woken.done():  # woken meanwhile (the job's end), or its wait is over
        waiter.woken.set_result(note)


def _concerns(waiter: Waiter, kind: str, value: str) -> bool:
    """Whether a notification of the waiter's job ends its wait (a ``done`` counts its waiting_on down)."""
    if waiter.deferred:
        return kind == "state"
    if kind == "split":
        return value in waiter.holders
    if kind == "refused":
        return not waiter.holders and value == waiter.taker
    if kind == "waiting":
        return not waiter.holders  # a take counts its leases worth waiting for again
    if kind == "pending":
        return not waiter.holders
    if kind == "done":
        if waiter.holders:
            return False
        waiter.waiting_on -= int(value)
        return waiter.waiting_on <= 0
    return True  # the job's state changed


def _connection_params() -> dict:
    from django.db import connections

    params = connections["default"].get_connection_params()
    return {key: value for key, value in params.items() if key in _CONNINFO}


_listeners: dict[int, Listener] = {}


def listener() -> Listener:
    """This event loop's listener (a server process runs one loop)."""
    loop = asyncio.get_running_loop()
    found = _listeners.get(id(loop))
    if found is None:
        found = _listeners[id(loop)] = Listener()
    return found
