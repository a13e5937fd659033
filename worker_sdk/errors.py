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


class ConfigurationError(ShardlineError):
    """The server's URL, a proxy or a CA bundle the environment names cannot be used: raised at once, not retried."""


class APIError(ShardlineError):
    """The server answered with an error. ``status``, ``code`` and ``message`` come from its JSON body."""

    default_code = "error"

    def __init__(self, status: int | str, code: str = "", message: str = "", body: dict | None = None):
        if isinstance(status, str) and not code:
            # Rebuilt from its text alone: a DataLoader re-raises a loader
            # process's exception as ``type(text)``, and keeps its class so.
            status, code, message = 0, self.default_code, status
            super().__init__(message)
        else:
            super().__init__(f"{message} (HTTP {status}, {code})")
        self.status = status
        self.code = code
        self.message = message
        self.body = body or {}


class AuthError(APIError):
    """401 or 403: no token, a wrong, expired or revoked one, or a role that may not do this."""


class LeaseLostError(APIError):
    """The lease is no longer ours: it expired and went to another worker, or the job was restored."""

    default_code = "lease_lost"


class JobSpecConflictError(APIError):
    """A job with this name exists with another spec; ``fields`` names the differences."""

    default_code = "job_spec_conflict"

    @property
    def fields(self) -> list[str]:
        return list(self.body.get("fields", []))


class JobFailedError(APIError):
    """The job failed on the server (for example, slicing found a missing file)."""

    default_code = "job_failed"


class JobCancelledError(APIError):
    """The job was cancelled (from the dashboard or the API): the message names who cancelled it and when.

    Raised by every way of reading a queue, so that a training script never
    ends as if it had read everything (TensorFlow's OutOfRangeError is for a
    real end only).
    """

    default_code = "job_cancelled"


_BY_CODE = {cls.default_code: cls for cls in (LeaseLostError, JobSpecConflictError, JobFailedError, JobCancelledError)}


def from_response(status: int, body: dict) -> APIError:
    code = str(body.get("error", "error"))
    message = str(body.get("message", "")) or f"HTTP {status}"
    if status in (401, 403):
        return AuthError(status, code, message, body)
    return _BY_CODE.get(code, APIError)(status, code, message, body)
