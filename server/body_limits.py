"""How large a request body may be: one rule for the ASGI gateway (which refuses a larger one before reading it)
and the JSON parser (which enforces it where no gateway runs, under WSGI).

Only job creation carries a large body (a works list of up to
SHARDLINE_MAX_WORKS paths), through the API or the dashboard's form; every
other request is small (a take of SHARDLINE_MAX_TAKE completions is well
under 1 MiB), so a worker token cannot make a web process hold hundreds of
megabytes by posting them to any other endpoint.
"""

from __future__ import annotations

import re

from django.conf import settings

JOB_CREATE = re.compile(r"^/(api/v1/jobs|jobs/new)/$")


def limit(method: str, path: str) -> int:
    if method == "POST" and JOB_CREATE.match(path):
        return settings.SHARDLINE_MAX_BODY_BYTES
    return min(settings.SHARDLINE_MAX_REQUEST_BYTES, settings.SHARDLINE_MAX_BODY_BYTES)


def message(limit: int) -> str:
    setting = (
        "SHARDLINE_MAX_BODY_BYTES" if limit == settings.SHARDLINE_MAX_BODY_BYTES else "SHARDLINE_MAX_REQUEST_BYTES"
    )
    return f"request body is larger than {limit} bytes ({setting})"
