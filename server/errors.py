"""The domain's errors. ``server.api.errors`` maps them to HTTP in one place."""

from __future__ import annotations


class ShardlineError(Exception):
    """Base class: ``status`` is the HTTP status, ``code`` a stable machine name."""

    status = 400
    code = "error"

    def __init__(self, message: str, **details):
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidInput(ShardlineError):
    status = 400
    code = "invalid"

    def __init__(self, message: str, fields: dict | None = None):
        super().__init__(message, fields=fields or {})


class NotFound(ShardlineError):
    status = 404
    code = "not_found"


class JobSpecConflict(ShardlineError):
    """Same job name, different spec."""

    status = 409
    code = "job_spec_conflict"

    def __init__(self, name: str, fields: list[str]):
        listed = ", ".join(fields)
        super().__init__(
            f"a job named {name!r} already exists with a different {listed}; "
            f"use another name for a new job, or the same spec to attach to it",
            fields=fields,
        )


class LeaseLost(ShardlineError):
    """The lease is no longer held with this token (expired and taken back, restored, or never held)."""

    status = 409
    code = "lease_lost"


class InvalidTransition(ShardlineError):
    """A job action that its current state does not allow (resume a running job, cancel a done one)."""

    status = 409
    code = "invalid_state"


class UserConflict(ShardlineError):
    """A token its user cannot have now (a role above the user's, a deactivated user). ``fields`` names the field.

    409, not 400: the same request is valid for another user, or for this one once an admin changed it.
    """

    status = 409
    code = "user_conflict"

    def __init__(self, message: str, field: str):
        super().__init__(message, fields={field: [message]})


class TokenInUse(ShardlineError):
    """A revocation of the very token the request is made with, not confirmed: the caller would lock itself out."""

    status = 409
    code = "token_in_use"


class SplitRefused(ShardlineError):
    """A split point the lease's current range does not allow (not a record range, before what was read).

    409, not 400: the same request is valid against another lease, or this
    one before its holder read on.
    """

    status = 409
    code = "split_refused"


class JobFailed(ShardlineError):
    status = 409
    code = "job_failed"


class JobCancelled(ShardlineError):
    """The job was cancelled: its workers must stop, and not as if they had read everything."""

    status = 409
    code = "job_cancelled"


class RequestInProgress(ShardlineError):
    """A repeat (the same Idempotency-Key) of a request that is still being answered: retry shortly."""

    status = 503
    code = "request_in_progress"
