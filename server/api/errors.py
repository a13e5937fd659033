"""One place that maps errors to HTTP: domain errors, DRF's, and database outages.

Every error body is JSON: ``{"error": code, "message": text}`` plus ``fields``
(field -> messages) for invalid input.
"""

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DataError, InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from ..errors import ShardlineError

log = logging.getLogger("shardline.api")


def _flatten(detail):
    if isinstance(detail, dict):
        return {key: _flatten(value) for key, value in detail.items()}
    if isinstance(detail, list):
        flat = []
        for value in detail:
            flat.extend(_flatten(value) if isinstance(value, list) else [_flatten(value)])
        return flat
    return str(detail)


def _summary(fields: dict) -> str:
    parts = []
    for name, messages in fields.items():
        if isinstance(messages, dict):
            parts.append(f"{name}: {_summary(messages)}")
        else:
            text = "; ".join(str(m) for m in messages) if isinstance(messages, list) else str(messages)
            parts.append(text if name == "non_field_errors" else f"{name}: {text}")
    return "; ".join(parts)


def exception_handler(exc, context):
    if isinstance(exc, ShardlineError):
        body = {"error": exc.code, "message": exc.message, **{k: v for k, v in exc.details.items() if v}}
        # A 503 is worth retrying (the SDK's transport does): say when.
        return Response(body, status=exc.status, headers={"Retry-After": "1"} if exc.status == 503 else None)
    if isinstance(exc, Http404):
        return Response({"error": "not_found", "message": "not found"}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail) if isinstance(exc.detail, dict) else {"non_field_errors": _flatten(exc.detail)}
        return Response(
            {"error": "invalid", "message": "invalid input: " + _summary(fields), "fields": fields},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, exceptions.APIException):
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else "error"
        return Response({"error": code, "message": str(exc.detail)}, status=exc.status_code, headers=headers)
    if isinstance(exc, RequestDataTooBig):
        # Django refuses a body whose Content-Length exceeds
        # DATA_UPLOAD_MAX_MEMORY_SIZE (= SHARDLINE_MAX_BODY_BYTES) before the
        # parser sees it; without this it would be Django's HTML 400 page.
        limit = settings.SHARDLINE_MAX_BODY_BYTES
        return Response(
            {"error": "too_large", "message": f"request body is larger than {limit} bytes (SHARDLINE_MAX_BODY_BYTES)"},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, (OperationalError, InterfaceError)):
        # The database is unreachable (restarting, failing over): the client
        # should retry; nothing was written.
        log.warning("database unavailable", extra={"event": "db_unavailable", "reason": type(exc).__name__})
        return Response(
            {"error": "unavailable", "message": "the database is unavailable; retry shortly"},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "1"},
        )
    if isinstance(exc, DataError):
        # A value the database cannot hold (out of range, bad encoding) that
        # validation let through: the client's input, so a 4xx.
        log.warning("database refused a value", extra={"event": "data_error", "reason": str(exc).splitlines()[0]})
        return Response(
            {"error": "invalid", "message": "a value is out of the range the database accepts"},
            status=status.HTTP_400_BAD_REQUEST,
        )
    return None
