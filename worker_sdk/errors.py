"""Errors of the worker SDK, one class per failure mode.

They mirror the server's error codes, so a training script can tell "the
server is unreachable" (retried already, then ConnectionError) from "my lease
was taken back" (LeaseLostError) from a bad request (APIError).
"""

from __future__ import annotations

import builtins


class ShardlineError(Exception):
    """Base class of every error the SDK raises."""


class ConnectionError(ShardlineError, builtins.ConnectionError):
    """The server could not be reached (or kept failing) for the whole retry budget."""


class APIError(ShardlineError):
    """The server answered with an error. ``status``, ``code`` and ``message`` come from its JSON body."""

    def __init__(self, status: int, code: str, message: str, body: dict | None = None):
        super().__init__(f"{message} (HTTP {status}, {code})")
        self.status = status
        self.code = code
        self.message = message
        self.body = body or {}


class AuthError(APIError):
    """401 or 403: no token, a wrong, expired or revoked one, or a role that may not do this."""


class LeaseLostError(APIError):
    """The lease is no longer ours: it expired and went to another worker, or the job was restored."""


class JobSpecConflictError(APIError):
    """A job with this name exists with another spec; ``fields`` names the differences."""

    @property
    def fields(self) -> list[str]:
        return list(self.body.get("fields", []))


class JobFailedError(APIError):
    """The job failed on the server (for example, slicing found a missing file)."""


_BY_CODE = {
    "lease_lost": LeaseLostError,
    "job_spec_conflict": JobSpecConflictError,
    "job_failed": JobFailedError,
}


def from_response(status: int, body: dict) -> APIError:
    code = str(body.get("error", "error"))
    message = str(body.get("message", "")) or f"HTTP {status}"
    if status in (401, 403):
        return AuthError(status, code, message, body)
    return _BY_CODE.get(code, APIError)(status, code, message, body)
