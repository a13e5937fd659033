"""The service's clock: an outage of the database or of the web server costs no lease (issue 25).

Holders cannot heartbeat to a service that is down, while their leases run
out by the database's clock: after a 10 s database stop, 10 s leases were
taken back from live holders and their items read twice. So the service
keeps a clock row (migrations/0020) of when it last reached the database,
and the first touch after a silence in it moves every lease that was live
when the service last spoke forward by the silence (service_clock.sql),
before anything can take it back.

- Every web process touches the row about once a second (``TICK``): from a
  thread with a connection of its own, so that an idle service is not taken
  for one that was down (a dead holder's lease would otherwise be moved at
  each idle spell, and never taken back while its job's other workers wait
  on the server), and before any API request once its last touch is a tick
  old. Only take.sql takes leases back, and only /api/v1/ requests run it,
  each through this middleware, also when the ASGI gateway runs a waiting
  one again (server/gateway.py; a parked take answered without running
  reclaims nothing, and its expiry recheck only reads). On the lease hot
  path this costs a monotonic-clock read.
- A silence is one over ``GAP``: while any process serves, touches are at
  most about a tick apart, so over ``GAP`` every process, or the database,
  was down. A process that touched within the last tick skips the check:
  no silence over ``GAP`` can have begun and ended since. Outages under
  ``GAP`` are not given back; a lease heartbeated every third of its
  timeout rides them out if that is a few seconds or more.
- Each lease keeps the time it had left when the silence began: one that
  had expired by then stays expired, a dead holder's gains at most that
  much per outage, and none is ever shortened. A process starved of the CPU
  for over ``GAP`` gives the live leases that much more, and nothing else.

On in server processes: under gunicorn (``SERVER_SOFTWARE``: ``make run``,
docker-compose, the tests' servers), or with SHARDLINE_SERVICE_CLOCK=1. Off
elsewhere: the in-process test client's requests run inside each test's
transaction, where tests set lease expiries by hand.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from datetime import datetime

from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from django.utils import timezone

from . import sql
from .conf import env_bool

log = logging.getLogger("shardline.clock")

TICK = 1.0  # seconds between a process's touches
GAP = 2.0  # a silence longer than this is an outage: two ticks, a slow statement's margin
PATHS = "/api/v1/"


def now() -> datetime:
    """The service's time in Python, the twin of ``shardline_now()`` in SQL (server/sql/schema.sql).

    Called as ``clock.now()``, so that a test moving time (tests/support.py,
    ServiceTime) moves it here and in the database together.
    """
    return timezone.now()


def report_silence(seconds: float, shifted: int) -> None:
    """Logs a silence of the service that a touch ended: a warning when leases were live through it, else a note.

    A service restarted after an idle spell (no lease live) was silent too,
    and gave nothing back: that is routine, not an operator's concern.
    """
    extra = {"event": "outage_given_back", "seconds": seconds, "count": shifted}
    if shifted:
        log.warning(
            "the service was silent %.1f s; %d live leases keep the time they had left", seconds, shifted, extra=extra
        )
    else:
        log.info("the service was silent %.1f s; no lease was live through it", seconds, extra=extra)


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
            report_silence(float(silence), shifted)
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
    from django.conf import settings
    from django.db import connections

    keywords = {d.keyword.decode() for d in psycopg.pq.Conninfo.get_defaults()}
    params = {k: v for k, v in connections["default"].get_connection_params().items() if k in keywords}
    params["application_name"] = f"{params.get('application_name') or 'shardline'}:clock"
    params.setdefault("connect_timeout", 5)
    if not settings.SHARDLINE_PREPARED_STATEMENTS:
        params["prepare_threshold"] = None  # a pooler sharing server sessions (see server/sql)
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
