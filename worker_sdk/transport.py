"""HTTP transport: the only place that retries.

Connection errors (an answer cut off halfway included), timeouts, 5xx and
429 are retried with exponential backoff and full jitter (so a thousand
workers do not hammer a restarting server in step), honouring
``Retry-After``, until ``retry_seconds`` have passed. Every other error is
raised at once as the matching ``worker_sdk.errors`` class.
"""

from __future__ import annotations

import logging
import os
import random
import time

import requests

from . import errors

log = logging.getLogger("worker_sdk.transport")

RETRY_STATUSES = {429, 500, 502, 503, 504}


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
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("SHARDLINE_TOKEN")
        self.timeout = timeout
        self.retry_seconds = (
            retry_seconds if retry_seconds is not None else float(os.environ.get("SHARDLINE_RETRY_SECONDS", "120"))
        )
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._session = None
        self._pid = None

    @property
    def session(self) -> requests.Session:
        # One pooled session per process: a forked child (a DataLoader worker)
        # must not share its parent's sockets.
        if self._session is None or self._pid != os.getpid():
            session = requests.Session()
            session.headers["User-Agent"] = "shardline-worker-sdk"
            if self.token:
                session.headers["Authorization"] = f"Token {self.token}"
            self._session, self._pid = session, os.getpid()
        return self._session

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_session"] = None
        state["_pid"] = None
        return state

    def close(self) -> None:
        """Closes the pooled connections (a later request opens new ones)."""
        if self._session is not None and self._pid == os.getpid():
            self._session.close()
        self._session = None

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
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        deadline = time.monotonic() + self.retry_seconds
        attempt = 0
        while True:
            problem = None
            try:
                response = self.session.request(
                    method, url, json=json, params=params, headers=headers, timeout=self.timeout + server_wait
                )
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
                # ChunkedEncodingError: the answer was cut off (the server went away while sending it).
                problem, wait = f"{type(exc).__name__}: {exc}", self.backoff(attempt)
            else:
                if response.status_code < 400:
                    if raw:
                        return response.content
                    return response.json() if response.content else None
                body = _json_body(response)
                if response.status_code == 401 and not self.token:
                    # The server's "credentials were not provided" does not say where they come from.
                    body = {
                        **body,
                        "message": "no token: set SHARDLINE_TOKEN (or pass token=...) to a key from "
                        "`manage.py create_token NAME --role worker` on the server",
                    }
                if response.status_code not in RETRY_STATUSES:
                    raise errors.from_response(response.status_code, body)
                problem = f"HTTP {response.status_code}: {body.get('message', '')}"
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


def _json_body(response) -> dict:
    try:
        body = response.json()
    except ValueError:
        return {"message": response.text[:200]}
    return body if isinstance(body, dict) else {"message": str(body)[:200]}


def _retry_after(response) -> float:
    try:
        return max(0.0, float(response.headers.get("Retry-After", 0)))
    except ValueError:
        return 0.0
