"""Leases a request named that were no longer its caller's: counted, and logged once per request.

A request may name up to SHARDLINE_MAX_TAKE leases (a take's or a batch's
completions, a heartbeat's leases): one log line for all of them, so that a
worker token cannot write a thousand lines with one request.
"""

import logging

from .. import metrics

log = logging.getLogger("shardline.leases")

# The ids a line names at most; its count says how many there were.
LOGGED_IDS = 10

_DOING = {"complete": "completion", "extend": "heartbeat", "fail": "failure"}


def report(op: str, ids: list[int]) -> None:
    """Counts the leases ``op`` (complete, extend, fail) found lost, and logs them in one line."""
    if not ids:
        return
    metrics.LEASES_LOST.labels(op).inc(len(ids))
    extra = {"event": "lease_lost", "item": ids[0], "reason": op, "count": len(ids)}
    if len(ids) > 1:
        extra["items"] = ids[:LOGGED_IDS]
    log.warning(f"{_DOING[op]} refused: lease lost", extra=extra)
