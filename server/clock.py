"""The service's clock: an outage of the database or of the web server costs no lease (issue 25).

Holders cannot heartbeat to a service that is down, while their leases run
out by the database's clock: after a 10 s database stop, 10 s leases were
taken back from live holders and their items read twice. So the service
keeps a clock row (migrations/0020) of when it last reached the database,
and the first request after a silence in it gives the leases that were live
when it last spoke the time the silence took from them (service_clock.sql),
before anything can take them back.

- Every web process touches the row about once a second (``TICK``): on a
  thread of its own (with a connection of its own), so that an idle service
  is not taken for one that is down, and before each API request that finds its process's last touch over
  a tick old. Only take.sql takes leases back, and only requests under
  /api/v1/ run it, each through this middleware, whether a thread runs it or
  the ASGI gateway runs it again after a wait (server/gateway.py; a parked
  take answered without running reclaims nothing, and its expiry recheck
  only reads). On the lease hot path this costs a monotonic-clock read; one
  statement a second per process besides.
- A silence is one over ``GAP``: while any process serves, touches are at
  most a tick apart, so over ``GAP`` every process, or the database, was
  down. Within a tick of its own touch a process skips the check: no
  silence over ``GAP`` can have begun and ended since. Shorter outages are
  not given back; a heartbeat every third of a lease leaves two thirds of
  it, so leases of 3 s and more ride them out as they are.
- Only a silence moves leases, by the time each had left when it began, so
  a lease whose holder died gains at most that once per outage, and no
  lease is ever shortened. A process starved of the CPU for over ``GAP``
  gives the live leases that much more, which nobody's correctness rests on.

Off outside a server process (the in-process test client runs inside a test
transaction whose leases a test sets by hand): on under gunicorn (how every
deployment serves, ``SERVER_SOFTWARE`` set), or with SHARDLINE_SERVICE_CLOCK=1.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from django.db import InterfaceError, OperationalError
from django.http import JsonResponse

from . import sql
from .conf import env_bool

log = logging.getLogger("shardline.clock")

TICK = 1.0  # seconds between a process's touches
GAP = 2.0  # a silence longer than this is an outage: two ticks, a slow statement's margin
PATHS = "/api/v1/"


class ServiceClock:
    """This process's side of the clock: when it last touched the row, and the thread that keeps touching it."""

    def __init__(self, tick: float = TICK, gap: float = GAP):
        self.tick = tick
        self.gap = gap
        self.touched_at: float | None = None  # time.monotonic() when this process's last good touch began
        self._ticking_pid: int | None = None
        self._failing = False
        self._start_lock = threading.Lock()

    def due(self) -> bool:
        touched = self.touched_at
        return touched is None or time.monotonic() - touched >= self.tick

    def touch(self) -> int:
        """Touches the row on this thread's connection, shifting leases after a silence; returns how many it shifted."""
        began = time.monotonic()
        row = sql.run("service_clock", {"gap": self.gap})[0]
        return self._touched(began, row.shifted, row.silence)

    def _touched(self, began: float, shifted: int, silence) -> int:
        # When it began: the database's now() is no earlier.
        self.touched_at = max(self.touched_at or began, began)
        if self._failing:
            self._failing = False
            log.info("service clock touched again", extra={"event": "clock_resumed"})
        if silence is not None:
            log.warning(
                "the service was silent %.1f s; live leases keep the time they had left",
                silence,
                extra={"event": "outage_given_back", "seconds": float(silence), "count": shifted},
            )
        return shifted

    def failed(self, exc: Exception) -> None:
        """Notes a touch that did not reach the database (logged once per outage)."""
        if not self._failing:
            self._failing = True
            log.warning("service clock not touched", extra={"event": "clock_failed", "reason": type(exc).__name__})

    def keep_ticking(self) -> None:
        """Starts this process's ticking thread, once (a forked child runs none of its parent's threads)."""
        if self._ticking_pid == os.getpid():
            return
        with self._start_lock:
            if self._ticking_pid != os.getpid():
                self._ticking_pid = os.getpid()
                threading.Thread(target=self._tick, name="shardline-clock", daemon=True).start()

    def _tick(self) -> None:
        # A plain connection of its own, named apart from the web threads'
        # ('<name>:clock'): Django replaces a broken or old connection at the
        # end of a request, and no request ends on this thread.
        text = sql.statement("service_clock")
        connection = None
        while True:
            touched = self.touched_at
            time.sleep(self.tick if touched is None else max(0.0, touched + self.tick - time.monotonic()))
            if not self.due():
                continue  # a request touched it meanwhile
            try:
                if connection is None:
                    connection = _connect()
                began = time.monotonic()
                shifted, silence = connection.execute(text, {"gap": self.gap}).fetchone()
                self._touched(began, shifted, silence)
            except Exception as exc:  # the thread must outlive any outage
                self.failed(exc)
                if connection is not None:
                    connection.close()
                    connection = None
                time.sleep(self.tick)


def _connect():
    import psycopg
    from django.db import connections

    keywords = {d.keyword.decode() for d in psycopg.pq.Conninfo.get_defaults()}
    params = {k: v for k, v in connections["default"].get_connection_params().items() if k in keywords}
    params["application_name"] = f"{params.get('application_name') or 'shardline'}:clock"
    params.setdefault("connect_timeout", 5)
    return psycopg.connect(**params, autocommit=True)


clock = ServiceClock()


def serving() -> bool:
    return env_bool("SHARDLINE_SERVICE_CLOCK", bool(os.environ.get("SERVER_SOFTWARE")))


class ServiceClockMiddleware:
    """Touches the clock before an API request when this process has not in the last tick."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.enabled = serving()

    def __call__(self, request):
        if self.enabled and request.path.startswith(PATHS):
            clock.keep_ticking()
            if clock.due():
                try:
                    clock.touch()
                except (OperationalError, InterfaceError) as exc:
                    # Outside the view, so DatabaseUnavailableMiddleware
                    # does not see it: answered here as the API answers it.
                    clock.failed(exc)
                    response = JsonResponse(
                        {"error": "unavailable", "message": "the database is unavailable; retry shortly"}, status=503
                    )
                    response["Retry-After"] = "1"
                    return response
        return self.get_response(request)
