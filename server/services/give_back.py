"""Items taken ahead of their consumer, given back unread to a worker that has nothing to read.

The SDK leases a consumer's next item while the consumer reads the current
one (worker_sdk.look_ahead), so that its training loop never waits on a
take. At the end of a job that would hold the tail: a slow worker's next
item waits behind its current one while the fast workers have nothing. So
an item taken ahead stays the server's to ask back until its consumer
starts it:

1. **Request.** A take that leases nothing asks the holder of the item
   taken ahead the longest ago (propose_give_back.sql). The request is a
   mark on the lease row, as a split's is; its holder's heartbeat, which
   waits on the server, is woken by it.
2. **Answer.** The holder gives the item back unread (release.sql: pending
   again, its attempt returned), and the asker's waiting take, woken by the
   item becoming pending, leases it. If the consumer started the item
   first, the holder keeps it, and the take that says so (take.sql's
   ``started``) wakes the asker to ask elsewhere.

Nothing is read twice: the holder's leaser decides, under one lock, whether
the consumer starts the item or it goes back, and only then tells the
server (worker_sdk.leaser). A take ahead never asks: its consumer has work.
"""

from __future__ import annotations

import logging

from .. import sql
from .splits import STALE_REQUEST

log = logging.getLogger("shardline.give_back")


def request(job_id: int, worker: str, consumer: str) -> bool:
    """Asks for an item taken ahead on behalf of ``worker`` (reading for ``consumer``); True when one is on its way."""
    row = sql.run("propose_give_back", {"job": job_id, "worker": worker, "consumer": consumer, "stale": STALE_REQUEST})[
        0
    ]
    if row.proposed is not None:
        log.info("give-back requested", extra={"event": "give_back_requested", "job": job_id, "item": row.proposed})
    return row.asked or row.proposed is not None
