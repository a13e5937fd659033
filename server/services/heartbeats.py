"""Heartbeats of lease holders, and what waiting takes ask without taking: one named statement each.

``extend`` keeps held leases alive, reports the holder's reading position
(the liquid tail) and its training loop's data stall, and brings the splits
asked of its leases; ``next_expiry`` and ``seen_waiting`` serve the takes
that wait on the server without running (server/parking.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from .. import metrics, sql
from ..callers import SERVER, Caller
from . import lost as lost_leases
from . import splits

log = logging.getLogger("shardline.leases")


def next_expiry(job_id: int) -> float | None:
    """Seconds until the job's earliest live lease expires (<= 0: one has; None: none is held)."""
    seconds = sql.run("next_expiry", {"job": job_id})[0].seconds
    return None if seconds is None else float(seconds)


def seen_waiting(workers: list[tuple[int, str]]) -> None:
    """(job, worker) pairs whose takes wait on the server without running (server/parking.py) were seen now."""
    sql.run("seen_waiting", {"jobs": [job for job, _name in workers], "workers": [name for _job, name in workers]})


def holder_gone(
    job_id: int,
    workers: frozenset[str],
    extended: dict[int, datetime],
    since: float,
    caller: Caller = SERVER,
    carried_only: bool = False,
) -> int:
    """Expires the leases of ``workers`` on the job that nobody extended since their heartbeat dropped ``since`` s ago.

    ``extended``: what that heartbeat extended, to when; ``carried_only``:
    only those (see holder_gone.sql). Returns how many expired.
    """
    params = {
        "job": job_id,
        "workers": sorted(workers),
        "ids": list(extended),
        "expiries": list(extended.values()),
        "since": since,
        "carried_only": carried_only,
        **caller.sql,
    }
    expired = sql.run("holder_gone", params)[0].expired
    if expired:
        metrics.HOLDERS_GONE.inc()
        log.info(
            "a holder went away: its leases expire now",
            extra={"event": "holder_gone", "job": job_id, "worker": ",".join(sorted(workers)), "count": expired},
        )
    return expired


@dataclass(frozen=True)
class Stall:
    """A training loop's data stall as its process's clock reads it (worker_sdk.stall): cumulative seconds."""

    clock: str
    waited: float
    busy: float


@dataclass
class Heartbeat:
    extended: dict[int, datetime]  # lease id -> new expiry
    lost: list[int]
    splits: dict[int, int]  # lease id -> the record a split was asked at (services/splits.py)
    heartbeat_in: float | None  # when the holder should heartbeat next (None: at its own pace)
    jobs: frozenset[int] = frozenset()
    holders: frozenset[str] = frozenset()  # the workers the leases are held by
    # Completed with their tokens (by the holder's consumer, or a request on
    # its way): the holder need not heartbeat them any more.
    done: list[int] = field(default_factory=list)
    # Items taken ahead of their consumer, asked back (services/give_back.py).
    give_back: list[int] = field(default_factory=list)
    lease_timeout: float = 0.0  # the job's, of the leases extended (0: none was)


def extend(
    pairs: list[tuple[int, int]],
    waiting: bool | None = None,
    positions: list[int | None] | None = None,
    caller: Caller = SERVER,
    stall: Stall | None = None,
    started: list[bool] | None = None,
) -> Heartbeat:
    """Heartbeat for (lease id, token) pairs of ``caller``'s leases, with the reading position in each where it has one.

    ``waiting``: whether the holder's process waits at the end of a queue
    (None leaves the mark as it is). ``stall``: the data stall of the loop
    the leases are read for, counted only with leases that were extended.
    """
    with metrics.timed("extend"):
        rows = sql.run(
            "extend",
            {
                "ids": [p[0] for p in pairs],
                "tokens": [p[1] for p in pairs],
                "positions": positions or [None] * len(pairs),
                "started": started or [False] * len(pairs),
                "waiting": waiting,
                "stall_clock": stall and stall.clock,
                "stall_waited": stall and stall.waited,
                "stall_busy": stall and stall.busy,
                **caller.sql,
            },
        )
    extended = {row.id: row.expires_at for row in rows if row.requested}
    lost = [(lease_id, token) for lease_id, token in pairs if lease_id not in extended]
    done: set[int] = set()
    if lost:
        # Completed with this token since the heartbeat left (a heartbeat that
        # waited on the server, or a consumer that completes what its loaders
        # read): nothing to extend, and nothing lost.
        done = {
            row.id
            for row in sql.run(
                "already_done", {"ids": [p[0] for p in lost], "tokens": [p[1] for p in lost], **caller.sql}
            )
        }
        lost = [pair for pair in lost if pair[0] not in done]
    lost = [lease_id for lease_id, _token in lost]
    lost_leases.report("extend", lost)
    asked = {row.id: row.split_at for row in rows if row.split_at is not None}
    return Heartbeat(
        extended,
        lost,
        asked,
        splits.heartbeat_in(rows),
        frozenset(row.job_id for row in rows),
        frozenset(row.worker for row in rows if row.worker),
        sorted(done),
        sorted(row.id for row in rows if row.give_back),
        max((row.lease_timeout for row in rows if row.requested), default=0.0),
    )
