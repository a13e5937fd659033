"""Jobs: what each is (its spec), the state it is in, and what may be done to it in that state."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.expressions import ArraySubquery
from django.db import models
from django.db.models import OuterRef

from .audit import warnings_of


class JobState(models.TextChoices):
    SLICING = "slicing"
    READY = "ready"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


# States in which a job hands out items.
ACTIVE_STATES = (JobState.READY, JobState.RUNNING)
FINAL_STATES = (JobState.DONE, JobState.CANCELLED, JobState.FAILED)


class JobAction(models.TextChoices):
    """What a person (or a restarted run) may do to a job; the API, the dashboard and the services read ACTIONS."""

    PAUSE = "pause", "Pause"
    RESUME = "resume", "Resume"
    CANCEL = "cancel", "Cancel"
    RETRY = "retry", "Retry failed items"
    RESTORE = "restore", "Restore a snapshot"


# The job's state machine: for each action, the states it is allowed from.
# Where an action leads is the services' business (resume returns to the
# state the job was paused in; retry and restore re-open a done job), but
# whether it is allowed is decided here and nowhere else. Slicing, done,
# running and failed are also reached without an action (server/services/jobs.py).
ACTIONS: dict[str, tuple[str, ...]] = {
    JobAction.PAUSE: (JobState.SLICING, JobState.READY, JobState.RUNNING),
    JobAction.RESUME: (JobState.PAUSED,),
    JobAction.CANCEL: (
        JobState.SLICING,
        JobState.READY,
        JobState.RUNNING,
        JobState.PAUSED,
    ),
    # Both need item rows to act on, and make no sense for a job that will
    # never hand anything out again.
    JobAction.RETRY: (JobState.READY, JobState.RUNNING, JobState.PAUSED, JobState.DONE),
    JobAction.RESTORE: (
        JobState.READY,
        JobState.RUNNING,
        JobState.PAUSED,
        JobState.DONE,
    ),
}


# Seconds a job may slice before its waiting takes say so (Job.slicing_stalled).
SLICING_PATIENCE = 60.0


class JobQuerySet(models.QuerySet):
    def with_warnings(self):
        """Each job with its warnings, oldest first, read in the same query (see ``Job.warnings``)."""
        return self.annotate(warning_messages=ArraySubquery(warnings_of(OuterRef("pk")).values("message")))


class Job(models.Model):
    # ``queue.run`` when the job serves a run, else the queue's name: unique.
    name = models.CharField(max_length=200, unique=True)
    queue = models.CharField(max_length=200, help_text="The WorkQueue's name: the dashboard groups its runs.")
    run = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text="The training run this job serves (SHARDLINE_RUN), if any.",
    )
    # The identity of the job besides its name: works (by digest), epochs,
    # shuffle, requested seed, prefix, slices. Two creates with the same name
    # and spec are the same job.
    spec = models.JSONField()
    spec_digest = models.CharField(max_length=64)
    works_count = models.PositiveIntegerField()
    num_epochs = models.PositiveIntegerField()
    shuffle = models.BooleanField()
    seed = models.BigIntegerField(help_text="The seed in use: the requested one, or one drawn at creation.")
    prefix = models.TextField(null=True, blank=True)
    num_slices = models.PositiveIntegerField(null=True, blank=True)
    lease_timeout = models.FloatField(help_text="Seconds a lease lives without a heartbeat.")
    max_attempts = models.PositiveIntegerField()
    # Whether the unread records of leased record ranges may be split off to
    # idle workers at the end of the queue (services/splits.py).
    split_tail = models.BooleanField(default=True)
    # Pieces split off: each is a new item of its epoch, at position
    # units_count + (the piece's number).
    splits = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.READY)
    # The state a paused job resumes to.
    resume_state = models.CharField(max_length=16, choices=JobState.choices, blank=True, default="")
    error = models.TextField(blank=True, default="")
    # While slicing: {"works_total", "works_inspected", "records_counted"}.
    slicing_progress = models.JSONField(default=dict, blank=True)
    # The tables among the works, as slicing pinned them: [{"work", "kind",
    # "version" (a Postgres snapshot, a Delta version, an Iceberg snapshot
    # id), "rows", "files"}]. Every run of the job reads these versions.
    tables = models.JSONField(default=list, blank=True)
    # Items per epoch (works, or slices once slicing is done).
    units_count = models.PositiveIntegerField(default=0)
    # Epochs [0, epochs_materialised) have item rows; later ones are created
    # when the earlier ones run out of pending items.
    epochs_materialised = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        db_table = "shardline_job"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "-created_at"], name="job_state_created")]

    def __str__(self) -> str:
        return f"{self.name} ({self.state})"

    def allows(self, action: str) -> bool:
        return self.state in ACTIONS[action]

    @property
    def slicing(self) -> bool:
        """Being sliced, or paused while slicing: its units and their records are not all known yet."""
        return self.state == JobState.SLICING or (
            self.state == JobState.PAUSED and self.resume_state == JobState.SLICING
        )

    @property
    def actions(self) -> list[str]:
        """The actions allowed in the job's current state, in ACTIONS order."""
        return [action for action in ACTIONS if self.allows(action)]

    @property
    def warnings(self) -> list[str]:
        """What the job's owner should know (works handed out whole...), oldest first.

        A list of jobs reads them in its own query (``JobQuerySet.with_warnings``)
        instead of one more query per job.
        """
        if "warning_messages" in self.__dict__:
            return list(self.warning_messages)
        return list(warnings_of(self.pk).values_list("message", flat=True))

    def slicing_stalled(self, now) -> str | None:
        """Why takes have waited long for slicing, once the job has been slicing for SLICING_PATIENCE; else None."""
        waited = (now - self.created_at).total_seconds()
        if not self.slicing or waited < SLICING_PATIENCE:
            return None
        progress = self.slicing_progress or {}
        return (
            f"job {self.name!r} has been slicing for {int(waited)} s ({progress.get('works_inspected', 0)} of "
            f"{progress.get('works_total', self.works_count)} works inspected, {progress.get('records_counted', 0)} "
            f"records counted); a Celery worker slices it: if this does not move, check that one is running and "
            f"reads the server's queue (manage.py serve starts one)"
        )
