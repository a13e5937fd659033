"""Structured logs: one line per event, ``key=value`` pairs after the message.

Callers pass fields with ``extra={"job": 3, "item": 17}``; only fields listed in
``FIELDS`` are printed, so a stray object (a request, a token) never reaches the
log by accident.
"""

import json
import logging

FIELDS = (
    "event",
    "job",
    "job_name",
    "state",
    "previous",
    "item",
    "items",
    "worker",
    "epoch",
    "user",
    "role",
    "reason",
    "count",
    "snapshot",
    "fenced",
    "token_id",
    "by",
)


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        parts = [
            self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            record.levelname,
            record.name,
            json.dumps(record.getMessage()),
        ]
        for field in FIELDS:
            if hasattr(record, field):
                parts.append(f"{field}={json.dumps(getattr(record, field), default=str)}")
        text = " ".join(parts)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text
