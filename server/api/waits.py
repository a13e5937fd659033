"""How a view says that its answer may wait: the ``X-Shardline-Wait`` header, read by server/gateway.py.

A take that found nothing but something may come (an item failing or being
split off, the leases worth waiting for ending, a paused job resuming), and
a heartbeat of record ranges that no split was asked of, may wait on the
server up to the seconds their request asked for (``wait``). The view
answers as always and ``offer``s a ``Wait``; the gateway that runs the app
(ASGI) waits for a notification and runs the request again. Served without
the gateway (``server.wsgi``), nothing is offered and every request answers
at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

# Header names as ASGI spells them (lower case, bytes).
WAIT_HEADER = b"x-shardline-wait"
GATEWAY_HEADER = b"x-shardline-gateway"


@dataclass(frozen=True)
class Wait:
    """What an answer may wait for: its request's ``wait`` seconds, and when to ask again regardless."""

    seconds: float
    job: int
    waiting_on: int = 0  # leases whose end a take waits for (server/waiting.py counts them down)
    wake_by: float | None = None  # seconds until the earliest lease expiry
    # A heartbeat's holders (worker names): it waits for a split asked of one of their leases.
    holders: frozenset[str] = frozenset()
    answer: str = "retry_after"  # the field that says when to ask again: 0 once the wait is used up
    # A take's worker: a split asked for it and refused wakes it (to ask another holder).
    taker: str | None = None

    def to_header(self) -> str:
        wake_by = "-" if self.wake_by is None else repr(float(self.wake_by))
        holders = ",".join(quote(name, safe="") for name in sorted(self.holders)) or "-"
        taker = "-" if self.taker is None else quote(self.taker, safe="")
        return f"{float(self.seconds)!r} {self.job} {self.waiting_on} {wake_by} {holders} {self.answer} {taker}"

    @classmethod
    def from_header(cls, value: str) -> "Wait":
        seconds, job, waiting_on, wake_by, holders, answer, taker = value.split()
        return cls(
            float(seconds),
            int(job),
            int(waiting_on),
            None if wake_by == "-" else float(wake_by),
            frozenset() if holders == "-" else frozenset(unquote(name) for name in holders.split(",")),
            answer,
            None if taker == "-" else unquote(taker),
        )


def offer(request, response, wait: Wait):
    """Marks ``response`` as one that may wait, when the gateway runs the request."""
    if request.META.get("HTTP_X_SHARDLINE_GATEWAY") == "1":
        response["X-Shardline-Wait"] = wait.to_header()
    return response
