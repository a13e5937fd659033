"""How a view says that its answer may wait: it offers a ``Wait`` that server/gateway.py takes.

A take that found nothing but something may come (an item failing or being
split off, the leases worth waiting for ending, a paused job resuming), a
deferred take (a slow worker near a job's end), and a heartbeat that has
nothing to tell (no split, give-back or lost lease), may wait on the server
up to the seconds their request asked for (``wait``). The view answers as
always and ``offer``s a ``Wait``; the gateway that runs the app (ASGI)
takes it by the run's id, waits for a notification and runs the request
again. A heartbeat with something to tell offers a Wait of 0 s: answered at
once, its holders are followed as a held one's are (server/holders.py).
Served without the gateway (``server.wsgi``), nothing is offered and every
request answers at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

# The header that carries a gateway's run id to the view (as ASGI spells
# it); the gateway drops any a client sent.
GATEWAY_HEADER = b"x-shardline-gateway"
# The gateway's runs under way (queued for a thread, or running), with when
# each was opened, and the waits their views offered, by run id, until the
# gateway takes them: the view runs on one of the gateway's threads, in the
# same process. Only a run the gateway opened may offer.
_runs: dict[str, float] = {}
_offered: dict[str, "Wait"] = {}


@dataclass(frozen=True)
class Wait:
    """What an answer may wait for: its request's ``wait`` seconds, and when to ask again regardless."""

    # 0: a heartbeat answered at once (it has something to tell), offered so
    # that the gateway awaits its holders' next one (server/holders.py).
    seconds: float
    job: int
    waiting_on: int = 0  # leases whose end a take waits for (server/waiting.py counts them down)
    wake_by: float | None = None  # seconds until the earliest lease expiry
    # At wake_by the request runs again, without asking whether a lease
    # really expired: its wait was for a split request, which may go stale.
    rerun: bool = False
    # A heartbeat's holders (worker names): it waits for a split asked of one of their leases.
    holders: frozenset[str] = frozenset()
    answer: str = "retry_after"  # the field that says when to ask again: 0 once the wait is used up
    # A take's worker: a split asked for it and refused wakes it (to ask another holder).
    taker: str | None = None
    # A deferred take: only its job's state wakes it (server/waiting.py), besides its rerun at wake_by.
    deferred: bool = False
    # A heartbeat's caller (callers.Caller) and what it extended, to when:
    # should its connection drop unanswered, or its holders not beat again
    # soon after its answer, the gateway expires the holders' leases that
    # nobody extended since (server/holders.py). None: no such check.
    caller: object = None
    extended: tuple = ()
    # Its holders send their next heartbeat within a second of each answer:
    # the gateway awaits it (server/holders.py), for a third of the job's
    # lease timeout at least.
    returns: bool = False
    lease_timeout: float = 0.0


def open_run(run: str) -> str:
    """A run of a request through Django that the gateway will ``taken`` (its id)."""
    _runs[run] = time.monotonic()
    return run


def oldest_run() -> float | None:
    """When the oldest run under way was opened (monotonic seconds); None when none is."""
    return min(_runs.values(), default=None)


def offer(request, response, wait: Wait):
    """Marks ``response`` as one that may wait, when the gateway runs the request."""
    run = request.META.get("HTTP_X_SHARDLINE_GATEWAY")
    if run in _runs:
        _offered[run] = wait
    return response


def taken(run: str) -> Wait | None:
    """The wait offered by the view of the gateway's run ``run``, if one was (once); the run is over."""
    _runs.pop(run, None)
    return _offered.pop(run, None)
