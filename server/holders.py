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
   answered at once at every heartbeat and never held. A holder that says
   it ``returns`` (the SDK sends its next heartbeat within a second of each
   answer) is awaited for a third of its lease timeout, RETURN_GRACE at
   least; unless its holders' next heartbeat came to this process, the
   leases that answer extended and nobody extended since then expire. A
   live holder whose next heartbeat went to another web process keeps them.

Only holders that asked to wait, and are not restartable (a restarted
process of the same name takes its leases back itself), are checked.
"""

from __future__ import annotations

import asyncio
import logging
import time

from . import parking
from .api import waits

log = logging.getLogger("shardline.leases")

# Seconds a holder whose waiting heartbeat dropped has to beat again before
# its leases expire: a blip's reconnect and retry (the SDK retries a failed
# heartbeat within a second). A process that died closed its sockets.
HOLDER_GRACE = 1.0
# Seconds after an answer by which its holders' next heartbeat must have
# come, at least (a third of the lease timeout when that is longer: the
# pause between heartbeats that a user's lease timeout was set to ride
# out). Longer than HOLDER_GRACE: no closed socket says the process died,
# only its silence, and a live process's heartbeat thread can be held off
# for a while right after an answer (a long garbage collection or an import
# holding the GIL, a loaded machine), which a held connection rides out.
RETURN_GRACE = 5.0
# While a request that came before the deadline is still queued or running
# here (an overloaded process), the check waits this long and looks again:
# it may be the holders' next heartbeat, not run yet.
RECHECK = 0.1
# Checks pending at once, at the most: past it (a storm of drops, a database
# that does not answer) a dead holder's leases expire by their timeout, and
# the one thread of waiting requests' statements (server/parking.py) is not
# buried in them.
MAX_HOLDER_CHECKS = 1000
# Leases of answered holders awaited at once, at the most (per process),
# counted as their answers extended them: past it, a holder killed between
# two heartbeats waits for its lease timeout.
MAX_AWAITED_LEASES = 200_000

_checks: set[asyncio.Task] = set()
_awaited: dict[tuple, tuple[asyncio.TimerHandle, int]] = {}
_awaited_leases = 0


def dropped(wait) -> None:
    """The waiting heartbeat of ``wait`` (a ``waits.Wait``) closed unanswered: its process may have died."""
    if wait.caller is not None:
        _check(wait, time.monotonic(), HOLDER_GRACE)


def answered(wait) -> None:
    """The gateway answered the heartbeat of ``wait``: if its holders said they return, their next one is awaited."""
    if wait.caller is None or not wait.returns or not wait.extended:
        return
    global _awaited_leases
    back(wait)
    if _awaited_leases + len(wait.extended) > MAX_AWAITED_LEASES:
        return
    grace = max(RETURN_GRACE, wait.lease_timeout / 3)
    deadline = time.monotonic() + grace
    handle = asyncio.get_running_loop().call_later(grace, _not_back, _key(wait), wait, deadline)
    _awaited[_key(wait)] = (handle, len(wait.extended))
    _awaited_leases += len(wait.extended)


def back(wait) -> None:
    """A heartbeat of ``wait``'s holders that asked to wait came: the one answered before needs no check."""
    _forget(_key(wait), cancel=True)


def _key(wait) -> tuple:
    return (wait.job, wait.holders, wait.caller)


def _forget(key: tuple, cancel: bool) -> None:
    global _awaited_leases
    awaited = _awaited.pop(key, None)
    if awaited is not None:
        handle, leases = awaited
        _awaited_leases -= leases
        if cancel:
            handle.cancel()


def _not_back(key: tuple, wait, deadline: float) -> None:
    oldest = waits.oldest_run()
    if oldest is not None and oldest <= deadline:
        # A request that came in time is queued or running here: it may be
        # the holders' heartbeat (which calls back()).
        handle = asyncio.get_running_loop().call_later(RECHECK, _not_back, key, wait, deadline)
        if key in _awaited:
            _awaited[key] = (handle, _awaited[key][1])
        return
    _forget(key, cancel=False)
    _check(wait, deadline, 0.0, carried_only=True)


def _check(wait, since: float, grace: float, carried_only: bool = False) -> None:
    if len(_checks) >= MAX_HOLDER_CHECKS:
        return
    task = asyncio.get_running_loop().create_task(_holder_gone(wait, since, grace, carried_only))
    # The loop keeps only weak references to tasks.
    _checks.add(task)
    task.add_done_callback(_checks.discard)


async def _holder_gone(wait, since: float, grace: float, carried_only: bool) -> None:
    """After ``grace``, expires the holders' leases that nobody extended since the monotonic time ``since``."""
    await asyncio.sleep(grace)
    try:
        await parking.off_loop(_expire_held, wait, since, carried_only)
    except Exception as exc:  # the database is away: the leases expire by their timeout
        log.warning("a holder's silence not followed up", extra={"event": "holder_check_failed", "reason": repr(exc)})


def _expire_held(wait, since: float, carried_only: bool) -> None:
    from django.db import close_old_connections

    from .services import heartbeats

    close_old_connections()
    # Read just before the statement, whose clock starts after: a lease the
    # dead holder took before it went silent ends before then plus its
    # timeout. (A live holder's lease taken since is kept by its beating again.)
    seconds = time.monotonic() - since
    heartbeats.holder_gone(wait.job, wait.holders, dict(wait.extended), seconds, wait.caller, carried_only)
