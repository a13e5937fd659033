"""Retrying failed items: an operator's action after fixing what made them fail."""

from __future__ import annotations

import logging

from django.db import transaction

from .. import sql
from ..errors import NotFound
from ..models import Event, EventKind, Job, JobAction
from .jobs import actor_name, check_allows

log = logging.getLogger("shardline.jobs")


def retry_failed(job_id: int, user=None) -> int:
    """Puts every failed item of the job back to pending with fresh attempts; returns how many.

    Allowed in the states of models.ACTIONS["retry"]: a cancelled job's items
    stay as they were (InvalidTransition otherwise).
    """
    with transaction.atomic():
        # Locked, so that a cancel cannot slip between the check and the update.
        job = Job.objects.select_for_update(no_key=True).filter(pk=job_id).first()
        if job is None:
            raise NotFound(f"no job with id {job_id}")
        check_allows(job, JobAction.RETRY)
        count = sql.run("retry_failed", {"job": job.id})[0].retried
        if count:
            Event.objects.create(
                job=job,
                kind=EventKind.STATE,
                worker=actor_name(user),
                message=f"{count} failed items put back to pending",
            )
    if count:
        log.info("failed items retried", extra={"event": "items_retried", "job": job.id, "count": count})
    return count
