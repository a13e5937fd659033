"""Whether a holder's process still lives, as the gateway sees its heartbeats: the leases of one that went away go back.

An SDK process keeps one heartbeat waiting on the server while it holds
leases (server/api/waits.py). Two things say that it went away:

1. **Dropped.** The waiting heartbeat's connection closed unanswered: a
   process that dies closes its sockets. HOLDER_GRACE later, the holders'
   leases that nobody extended since expire (heartbeats.holder_gone).
2. **Not back.** The gateway answered it (its wait was over, or it had a
   split, a give-back or a lost lease to tell) and the next one did not
   come. Between an answer and the next heartbeat the process holds no
   connection here, and one killed then was noticed only at its lease
   timeout: a holder of a range not being read yet, asked for a split, was
   answered at once at every heartbeat and never held. The SDK sends the
   next one at once after a held answer, and soon after one that told it
   something; RETURN_GRACE after the answer, unless the holders' next
   heartbeat came to this process, the same check runs. It expires only
   leases nobody extended since, so a live holder whose next heartbeat
   went to another web process keeps them.

Only holders that asked to wait, and are not restartable (a restarted
process of the same name takes its leases back itself), are checked.
"""

from __future__ import annotations

import asyncio
import logging
import time

from . import parking

log = logging.getLogger("shardline.leases")

# Seconds a holder whose waiting heartbeat dropped has to beat again before
# its leases expire: a blip's reconnect and retry (the SDK retries a failed
# heartbeat within a second). A process that died closed its sockets.
HOLDER_GRACE = 1.0
# Seconds after an answer by which its holder's next heartbeat must have
# come. Longer than HOLDER_GRACE: no closed socket says the process died,
# only its silence, and a live process's heartbeat thread can be held off
# for a while right after an answer (a long garbage collection or an import
# holding the GIL, a loaded machine), which a held connection rides out.
# Past the SDK's slowest pace after an answer too (a split it cannot
# answer yet: the server's range pace, 2 s).
RETURN_GRACE = 5.0
# Checks pending at once, at the most: past it (a storm of drops, a database
# that does not answer) a dead holder's leases expire by their timeout, and
# the one thread of waiting requests' statements (server/parking.py) is not
# buried in them.
MAX_HOLDER_CHECKS = 1000
# Answered holders awaited at once, at the most (per process): past it, a
# holder killed between two heartbeats waits for its lease timeout.
MAX_AWAITED = 100_000

_checks: set[asyncio.Task] = set()
_awaited: dict[tuple, asyncio.TimerHandle] = {}


def dropped(wait) -> None:
    """The waiting heartbeat of ``wait`` (a ``waits.Wait``) closed unanswered: its process may have died."""
    if wait.caller is not None:
        _check(wait, time.monotonic(), HOLDER_GRACE)


def answered(wait) -> None:
    """The gateway answered the heartbeat of ``wait``: its holders' next one is awaited for RETURN_GRACE."""
    if wait.caller is None:
        return
    key = _key(wait)
    handle = _awaited.pop(key, None)
    if handle is not None:
        handle.cancel()
    if len(_awaited) < MAX_AWAITED:
        loop = asyncio.get_running_loop()
        _awaited[key] = loop.call_later(RETURN_GRACE, _not_back, key, wait, time.monotonic())


def back(wait) -> None:
    """A heartbeat of ``wait``'s holders that asked to wait came: the one answered before needs no check."""
    handle = _awaited.pop(_key(wait), None)
    if handle is not None:
        handle.cancel()


def _key(wait) -> tuple:
    return (wait.job, wait.holders, wait.caller)


def _not_back(key: tuple, wait, answered_at: float) -> None:
    _awaited.pop(key, None)
    _check(wait, answered_at, 0.0)


def _check(wait, since: float, grace: float) -> None:
    if len(_checks) >= MAX_HOLDER_CHECKS:
        return
    task = asyncio.get_running_loop().create_task(_holder_gone(wait, since, grace))
    # The loop keeps only weak references to tasks.
    _checks.add(task)
    task.add_done_callback(_checks.discard)


async def _holder_gone(wait, since: float, grace: float) -> None:
    """After ``grace``, expires the holders' leases that nobody extended since the monotonic time ``since``."""
    await asyncio.sleep(grace)
    try:
        await parking.off_loop(_expire_held, wait, since)
    except Exception as exc:  # the database is away: the leases expire by their timeout
        log.warning("a holder's silence not followed up", extra={"event": "holder_check_failed", "reason": repr(exc)})


def _expire_held(wait, since: float) -> None:
    from django.db import close_old_connections

    from .services import heartbeats

    close_old_connections()
    # Read just before the statement, whose clock starts after: a lease the
    # dead holder took before it went silent ends before then plus its
    # timeout. (A live holder's lease taken since is kept by its beating again.)
    heartbeats.holder_gone(wait.job, wait.holders, dict(wait.extended), time.monotonic() - since, wait.caller)
