"""Retrying failed items: an operator's action after fixing what made them fail."""

from __future__ import annotations

import logging

from django.db import connection, transaction

from .. import sql
from ..models import Event, EventKind
from .jobs import get_job

log = logging.getLogger("shardline.jobs")


def retry_failed(job_id: int, user=None) -> int:
    """Puts every failed item of the job back to pending with fresh attempts; returns how many."""
    job = get_job(job_id)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql.statement("retry_failed"), {"job": job.id})
            count = cursor.fetchone()[0]
        if count:
            who = user.get_username() if user is not None and user.is_authenticated else ""
            Event.objects.create(job=job, kind=EventKind.STATE, worker=who, message=f"{count} failed items put back to pending")
    if count:
        log.info("failed items retried", extra={"event": "items_retried", "job": job.id, "count": count})
    return count
