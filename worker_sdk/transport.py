"""HTTP transport: the only place that retries.

Connection errors (an answer cut off halfway included), timeouts, 5xx and
429 are retried with exponential backoff and full jitter (so a thousand
workers do not hammer a restarting server in step), honouring
``Retry-After``, until ``retry_seconds`` have passed. A kept-alive
connection the server closed under a request is the exception: that
request goes again at once, once, unlogged. Every other error is raised at
once as the matching ``worker_sdk.errors`` class.

Requests go through urllib3 directly, not requests: a training process
sends one for each item, and requests' own layers (environment settings
merged on every call, hooks, adapters) cost about three times urllib3's CPU
per request (bench/RESULTS.md), on the cores the training loop needs. What
requests read from the environment, proxies and the CA bundle, is read once
per process instead (worker_sdk.connections).
"""

from __future__ import annotations

import http.client
import json as jsonlib
import logging
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

import urllib3

from . import connections, errors

log = logging.getLogger("worker_sdk.transport")

RETRY_STATUSES = {429, 500, 502, 503, 504}
# What a dropped connection raises anywhere in urllib3 (a refused connect,
# a reset, an answer cut off halfway, a timeout): retried. A URL urllib3
# cannot use (LocationValueError, an HTTPError too) is raised at once.
CONNECTION_ERRORS = (urllib3.exceptions.HTTPError, OSError)
# How a pooled connection the server closed as the request went out fails
# (an idle kept-alive one it timed out: uvicorn closes them after 5 s).
CLOSED_UNDER = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


@dataclass(frozen=True)
class Reply:
    """One HTTP answer, read whole."""

    status: int
    headers: Mapping[str, str]  # case-insensitive (an ASGI server sends names lowercased)
    body: bytes

    def json(self):
        return jsonlib.loads(self.body)

    def text(self, limit: int = 200) -> str:
        return self.body[:limit].decode("utf-8", "replace")


class Transport:
    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry_seconds: float | None = None,
        backoff_base: float = 0.2,
        backoff_max: float = 5.0,
    ):
        url = url or os.environ.get("SHARDLINE_URL")
        if not url:
            raise ValueError(
                "no Shardline server: pass url=... or set SHARDLINE_URL (e.g. http://shardline.internal:8000)"
            )
        connections.check_url(url)
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("SHARDLINE_TOKEN")
        self.timeout = timeout
        self.retry_seconds = (
            retry_seconds if retry_seconds is not None else float(os.environ.get("SHARDLINE_RETRY_SECONDS", "120"))
        )
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._pool = None
        self._pid = None

    @property
    def connected(self) -> bool:
        """Whether this process holds a pool of connections (``close`` drops it; the next request makes one)."""
        return self._pool is not None and self._pid == os.getpid()

    def pool(self) -> urllib3.PoolManager:
        # One pool per process: a forked child (a DataLoader worker) must not
        # share its parent's sockets.
        if not self.connected:
            self._pool = connections.pool_for(self.url)
            self._pid = os.getpid()
        return self._pool

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_pool"] = None
        state["_pid"] = None
        return state

    def close(self) -> None:
        """Closes the pooled connections (a later request opens new ones)."""
        if self.connected:
            self._pool.clear()
        self._pool = None

    def send(self, method: str, url: str, body: bytes | None, headers: dict, timeout: float) -> Reply:
        """One HTTP exchange, not retried; a dropped connection raises one of CONNECTION_ERRORS."""
        # A request's own headers replace the pool's in urllib3: these are whole.
        headers = {"User-Agent": "shardline-worker-sdk", **headers}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        response = self.pool().request(
            method, url, body=body, headers=headers, timeout=timeout, redirect=False, preload_content=True
        )
        return Reply(response.status, response.headers, response.data)

    def backoff(self, attempt: int) -> float:
        return random.uniform(0, min(self.backoff_max, self.backoff_base * 2**attempt))

    def request(
        self,
        method: str,
        path: str,
        *,
        json=None,
        params=None,
        idempotency_key: str | None = None,
        server_wait: float = 0.0,
        raw: bool = False,
        retry_pace: float | None = None,
        retry: bool = True,
    ):
        """One API call, retried as the module docstring says; every retry carries the same ``idempotency_key``.

        ``server_wait``: seconds the server may hold the request (a waiting
        take), added to the read timeout. ``raw``: the answer's bytes (a CSV
        export), not its JSON. ``retry_pace``: the longest wait between
        retries, the server's Retry-After included (a heartbeat's lease runs
        out behind a longer one). ``retry``: False raises the first failure
        that would be retried (the caller retries with a newer request).
        """
        url = self.url + path
        if params:
            # As requests encoded them: None leaves the key out, a list repeats it.
            query = urlencode({k: v for k, v in params.items() if v is not None}, doseq=True)
            url = f"{url}?{query}" if query else url
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        data = None
        if json is not None:
            data = jsonlib.dumps(json, allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
        deadline = time.monotonic() + self.retry_seconds
        attempt = 0
        reconnected = False
        while True:
            problem = None
            try:
                response = self.send(method, url, data, headers, self.timeout + server_wait)
            except urllib3.exceptions.LocationValueError as exc:  # a proxy's scheme included
                raise errors.ConfigurationError(f"{method} {url}: {exc}") from exc
            except CONNECTION_ERRORS as exc:
                if not reconnected and closed_under(exc):
                    # The race every keep-alive client meets, not an outage:
                    # sent again at once on a new connection, and not logged
                    # as a failure (a server that is down fails this one too).
                    reconnected = True
                    log.debug(
                        "%s %s: the server closed the connection under the request; sending it again", method, path
                    )
                    continue
                # A reset, a refused connection, a timeout, an answer cut off halfway (the server went away).
                problem, wait = f"{type(exc).__name__}: {exc}", self.backoff(attempt)
            else:
                if 300 <= response.status < 400:
                    # Not followed: a POST redirected loses its body, and a
                    # server that redirects the API is configured elsewhere.
                    raise errors.ShardlineError(
                        f"{method} {url}: the server redirected ({response.status}) to "
                        f"{response.headers.get('Location', '?')}; set SHARDLINE_URL to the server's own address"
                    )
                if response.status < 400:
                    if raw:
                        return response.body
                    return response.json() if response.body else None
                body = _json_body(response)
                if response.status == 401 and not self.token:
                    # The server's "credentials were not provided" does not say where they come from.
                    body = {
                        **body,
                        "message": "no token: set SHARDLINE_TOKEN (or pass token=...) to a key from "
                        "`manage.py create_token NAME --role worker` on the server",
                    }
                if response.status not in RETRY_STATUSES:
                    raise errors.from_response(response.status, body)
                problem = f"HTTP {response.status}: {body.get('message', '')}"
                wait = max(self.backoff(attempt), _retry_after(response))
            if retry_pace is not None:
                wait = min(wait, retry_pace)
            if not retry:
                raise errors.ConnectionError(f"{method} {url} failed: {problem}")
            # The last wait is cut to the deadline, not skipped: one long
            # jittered draw must not end the retrying early (it gave up after
            # 0.2 s of a 1.5-s budget).
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.ConnectionError(
                    f"gave up on {method} {url} after {attempt + 1} attempts over {self.retry_seconds:.0f}s "
                    f"(SHARDLINE_RETRY_SECONDS): {problem}"
                )
            if attempt == 0:
                log.warning("%s %s failed (%s); retrying", method, path, problem)
            time.sleep(min(wait, left))
            attempt += 1


def closed_under(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection the server closed before answering (urllib3's "Connection aborted.")."""
    if not isinstance(exc, urllib3.exceptions.ProtocolError):
        return False
    cause = exc.args[1] if len(exc.args) > 1 else exc.__cause__
    return isinstance(cause, CLOSED_UNDER)


def _json_body(response: Reply) -> dict:
    try:
        body = response.json()
    except ValueError:
        return {"message": response.text()}
    return body if isinstance(body, dict) else {"message": str(body)[:200]}


def _retry_after(response: Reply) -> float:
    try:
        return max(0.0, float(response.headers.get("Retry-After", 0)))
    except ValueError:
        return 0.0
