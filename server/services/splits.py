"""The liquid tail: the unread records of a leased record range, split off to a worker that has nothing to read.

Dynamic work rebalancing as Dataflow does it for its sources (a range
tracker's try_claim and try_split), on leases:

1. **Request.** A take that leases nothing, in a job with nothing pending,
   asks for a split (propose_split.sql): of the lease expected to finish
   last, at the point where its holder and the taker would finish together.
   The request is a mark on the lease row; nothing is cut yet, because only
   the holder knows how far it has read.
2. **Answer.** The holder learns of it with its next heartbeat (the server
   tells holders of record ranges to heartbeat every TAIL_HEARTBEAT seconds
   while the job is in its tail) and answers with the record it will stop at:
   the point asked, or the next record it has not claimed if it is already
   past it, or its end (a refusal: too little left).
3. **Cut.** One statement (cut.sql) shrinks the lease to [start, at) and
   makes [at, end) new pending items of the same epoch, which the next takes
   lease; a split of a split is the same.

Where to cut is planned for the whole job, not for the pair: the holder
keeps what it reads by the time all the job's workers, sharing every unread
record from now on, would finish, and the rest is cut into as many pieces as
there are workers to read it by then. When the first fast worker runs out,
one answer from a slow holder hands work to every idle worker; a split
planned for the pair alone (finish together with this one taker) leaves the
slow holder seconds of reading and needs a chain of further splits, a round
trip each, while the others wait (bench/RESULTS.md, "The liquid tail").

Nothing is read twice or skipped: the holder claims each record before it
reads it and never claims one at or past a point it answered, the cut is
fenced by the lease's token (a lease that expired or was restored cannot be
cut), never goes below the position the holder reported, and a repeat of an
answer is answered with the same remainder. The holder completes its lease
only after its cut was acknowledged (worker_sdk.leaser).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from django.conf import settings

from worker_sdk import formats

from .. import metrics, sql
from ..callers import SERVER, Caller
from ..errors import LeaseLost, SplitRefused

log = logging.getLogger("shardline.splits")

# How often holders of record ranges heartbeat (reporting their position and
# hearing split requests): in the tail of their job, and before it, so that
# they hear that the tail has begun.
TAIL_HEARTBEAT = 0.25
RANGE_HEARTBEAT = 2.0
# The request's lead: how long the holder reads on before it hears of it.
# A holder's heartbeat waits on the server (server/gateway.py) and hears a
# request within milliseconds. Served without the gateway, it hears it at its
# next heartbeat, up to TAIL_HEARTBEAT later, and if it is past the point by
# then it stops where it is: it keeps less than planned, and the idle workers
# get more. Erring short is cheap, erring long is not: a slow holder that
# keeps a few records too many is the last worker to finish.
REQUEST_LEAD = 0.05
# An unanswered request is replaced after this long (its holder may be dead).
STALE_REQUEST = 4 * TAIL_HEARTBEAT + 1.0
# A split leaves to either side at least SHARDLINE_SPLIT_MIN_RECORDS, or
# what its holder reads in this long if that is fewer: a piece is worth a
# request and a take (tens of milliseconds) once the holder would take this
# long to read it, however few records that is. At 0.5 s the last pieces of
# a job of many slices were too coarse to share: its workers finished up to
# a second apart (bench/RESULTS.md, 2026-12-01); at 0.15 s the last slice of
# such a job was still cut in two for seven idle workers (2026-12-07).
PIECE_SECONDS = 0.05
# An idle worker's pace is that of the record range it completed last,
# within this long (propose_split.sql): older, it says little of now.
RECENT_PACE = 10.0


def floor() -> int:
    return settings.SHARDLINE_SPLIT_MIN_RECORDS


def request(job_id: int, worker: str, consumer: str) -> bool:
    """Asks for a split on behalf of ``worker`` (reading for ``consumer``), which found nothing to lease; True when one is on its way."""
    row = sql.run(
        "propose_split",
        {
            "job": job_id,
            "worker": worker,
            "consumer": consumer,
            "floor": floor(),
            "piece_seconds": PIECE_SECONDS,
            "recent": RECENT_PACE,
            "lead": REQUEST_LEAD,
            "stale": STALE_REQUEST,
        },
    )[0]
    if row.proposed is not None:
        log.info("split requested", extra={"event": "split_requested", "job": job_id, "item": row.proposed})
    return row.asked or row.proposed is not None


def heartbeat_in(rows) -> float | None:
    """How soon the holder of extend.sql's ``rows`` should heartbeat again (None: its own pace)."""
    ranged = [row for row in rows if row.ranged]
    if not ranged:
        return None
    return TAIL_HEARTBEAT if any(row.tail for row in ranged) else RANGE_HEARTBEAT


def trim(lease, records: int, caller: Caller = SERVER):
    """``lease`` with at most ``records`` records: a longer range is cut there, and its rest is a new pending item."""
    if lease.start is None or lease.end is None or lease.end - lease.start <= records:
        return lease
    at = lease.start + records
    cut(lease.id, lease.token, at, caller)
    path, forced = formats.split_format(lease.item)
    return replace(lease, end=at, item=formats.slice_item(formats.parse(path).path, lease.start, at, forced))


def cut(lease_id: int, token: int, at: int, caller: Caller = SERVER) -> dict:
    """The holder of ``lease_id`` stops at record ``at``: below its end, the rest becomes a new item."""
    with metrics.timed("split"):
        rows = sql.run("cut", {"id": lease_id, "token": token, "at": at, **caller.sql})
        if not rows:
            metrics.LEASES_LOST.labels("split").inc()
            raise LeaseLost(
                f"lease {lease_id} is not held with token {token}: it expired and was taken back, or was never yours"
            )
        row = rows[0]
        if row.stop is None:
            raise SplitRefused(f"lease {lease_id} is not a record range: it cannot be split")
        if not row.split and at < row.stop:
            raise SplitRefused(
                f"cannot split lease {lease_id} at record {at}: a split point must lie after its first record "
                f"({row.first}) and at or after the position its holder reported"
            )
    if row.made:
        metrics.LEASE_ITEMS.labels("split").inc(row.pieces)  # the items made
        log.info(
            "lease split",
            extra={"event": "lease_split", "job": row.job_id, "item": lease_id, "count": row.stop - at},
        )

    return {
        "id": lease_id,
        "start": row.first,
        "end": min(at, row.stop),
        "split": row.split,
        "remainder": row.remainder,
    }
