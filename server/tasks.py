"""Celery tasks: thin, idempotent, taking ids and calling services."""

from celery import shared_task
from celery.signals import worker_ready

from .services import slicing


# acks_late + reject_on_worker_lost: a worker killed mid-task leaves the
# message unacknowledged, so another worker runs it again; slice_job writes
# its result in one transaction and does nothing for a job already sliced.
@shared_task(name="shardline.slice_job", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def slice_job(job_id: int) -> str:
    return slicing.slice_job(job_id)


@worker_ready.connect
def resume_unfinished_slicing(sender=None, **kwargs):
    # A job left in `slicing` by a worker that died (with a broker that does
    # not redeliver, like the filesystem one) is sliced again when a worker
    # starts. Running twice is harmless: the second run installs nothing.
    for job_id in slicing.jobs_waiting():
        slice_job.delay(job_id)
