"""Job lifecycle: create or attach, epochs, pause / resume / cancel, completion."""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from dataclasses import dataclass, field

from django.db import transaction

from worker_sdk import formats

from .. import clock, sql, tasks
from ..errors import InvalidTransition, JobSpecConflict, NotFound
from ..models import ACTIONS, FINAL_STATES, Event, EventKind, Job, JobAction, JobState, ServiceNow
from . import units

log = logging.getLogger("shardline.jobs")


@dataclass(frozen=True)
class JobSpec:
    """A validated job request (the API serializer and the dashboard form build it)."""

    name: str
    works: list[str]
    # The queue and run the name was made of (``queue.run``), as the caller
    # said them; neither is read back from the name. No run: the queue is
    # the name.
    queue: str = ""
    run: str = ""
    num_epochs: int = 1
    shuffle: bool = True
    seed: int | None = None
    prefix: str | None = None
    num_slices: int | None = None
    lease_timeout: float = 60.0
    max_attempts: int = 3
    split_tail: bool = True
    _digest_cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def works_digest(self) -> str:
        if "works" not in self._digest_cache:
            h = hashlib.sha256()
            for work in self.works:
                h.update(work.encode("utf-8"))
                h.update(b"\n")
            self._digest_cache["works"] = h.hexdigest()
        return self._digest_cache["works"]

    def identity(self) -> dict:
        """The stored spec: what a later create is compared with."""
        return {
            "works_digest": self.works_digest,
            "works_count": len(self.works),
            "num_epochs": self.num_epochs,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "prefix": self.prefix,
            "num_slices": self.num_slices,
        }

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()


def differing_fields(job: Job, spec: JobSpec) -> list[str]:
    stored = job.spec
    differs = []
    if stored["works_digest"] != spec.works_digest:
        differs.append("works")
    for name in ("num_epochs", "shuffle", "prefix", "num_slices"):
        if stored[name] != getattr(spec, name):
            differs.append(name)
    # seed=None means "any seed": every worker of a run that left the seed to
    # the server attaches to the job that drew one.
    if spec.seed is not None and spec.seed != job.seed:
        differs.append("seed")
    return differs


def create_or_attach(spec: JobSpec, user=None, replaces: int | None = None) -> tuple[Job, bool]:
    """Returns (job, created). Exactly one job results however many callers race.

    ``replaces``: the id of the job of this name that a new spec replaces
    (the caller may, api/permissions.check_may_replace): it is retired, and
    the new job takes the name. Every worker of the restarted run may send
    it: the first replaces, the others attach to what it created.
    """
    with transaction.atomic():
        sql.run("lock_job_name", {"name": spec.name})
        existing = Job.objects.filter(name=spec.name).first()
        if existing is not None:
            differs = differing_fields(existing, spec)
            if not differs:
                return existing, False
            if replaces is None or replaces != existing.id:
                raise JobSpecConflict(spec.name, differs)
            _retire(existing, differs, user)

        # Tables are always sliced: slicing pins the version every run reads.
        slices = bool(spec.num_slices) or any(formats.table_kind(work) for work in spec.works)
        job = Job.objects.create(
            name=spec.name,
            queue=spec.queue or spec.name,
            run=spec.run,
            spec=spec.identity(),
            spec_digest=spec.digest(),
            works_count=len(spec.works),
            num_epochs=spec.num_epochs,
            shuffle=spec.shuffle,
            seed=spec.seed if spec.seed is not None else secrets.randbelow(2**31),
            prefix=spec.prefix,
            num_slices=spec.num_slices,
            lease_timeout=spec.lease_timeout,
            max_attempts=spec.max_attempts,
            split_tail=spec.split_tail,
            state=JobState.SLICING if slices else JobState.READY,
            units_count=0 if slices else len(spec.works),
            slicing_progress={"works_total": len(spec.works), "works_inspected": 0, "records_counted": 0}
            if slices
            else {},
            created_by=user if user is not None and user.is_authenticated else None,
        )
        # While slicing, the units are the works themselves; the slicing task
        # replaces them with record ranges.
        units.write_units(job.id, _work_units(spec))
        if slices:
            # After commit: the worker must find the job it is told about.
            transaction.on_commit(lambda: tasks.slice_job.delay(job.id))
            message = (
                f"{len(spec.works)} works to slice into {spec.num_slices} items per epoch, {spec.num_epochs} epochs"
                if spec.num_slices
                else f"{len(spec.works)} works, tables among them to pin and count, {spec.num_epochs} epochs"
            )
        else:
            units.materialise_epoch(job.id, 0)
            message = f"{len(spec.works)} items per epoch, {spec.num_epochs} epochs"
        Event.objects.create(job=job, kind=EventKind.CREATED, message=message)
        job.refresh_from_db()
    log.info(
        "job created", extra={"event": "job_created", "job": job.id, "job_name": job.name, "count": job.units_count}
    )
    return job, True


def _retire(job: Job, differs: list[str], user=None) -> None:
    """Frees a replaced job's name: renamed NAME-replaced-ID, and cancelled if it was still going."""
    suffix = f"-replaced-{job.id}"
    old_name = job.name
    job.name = old_name[: 200 - len(suffix)] + suffix
    fields = ["name", "updated_at"]
    previous = job.state
    if job.state not in FINAL_STATES:
        job.state, job.finished_at = JobState.CANCELLED, clock.now()
        fields += ["state", "finished_at"]
    job.save(update_fields=fields)
    Event.objects.create(
        job=job,
        kind=EventKind.STATE,
        message=f"{previous} -> {job.state} (replaced: a run named {old_name!r} restored a checkpoint of this job "
        f"and reads another {', '.join(differs)})",
        worker=actor_name(user),
    )
    log.info(
        "job replaced",
        extra={"event": "job_replaced", "job": job.id, "job_name": old_name, "user": actor_name(user)},
    )


def _work_units(spec: JobSpec):
    """The works as units: a work that names a slice (path?start=S&end=E) is a record range."""
    for work in spec.works:
        item = (spec.prefix or "") + work
        try:
            piece = formats.parse(item) if "?" in item else None
        except formats.FormatError:  # refused at validation; read whole if one slips through
            piece = None
        yield item, None, piece and piece.start, piece and piece.end, None


def get_job(job_id: int) -> Job:
    try:
        return Job.objects.get(pk=job_id)
    except (Job.DoesNotExist, ValueError, TypeError):
        raise NotFound(f"no job with id {job_id}") from None


@transaction.atomic  # the state and its event together: a worker told "cancelled" also learns by whom
def _transition(job_id: int, action: str, target: str, user=None, **changes) -> Job:
    job = get_job(job_id)
    updated = Job.objects.filter(pk=job_id, state__in=ACTIONS[action]).update(
        state=target, updated_at=clock.now(), **changes
    )
    if not updated:
        job.refresh_from_db(fields=["state"])  # changed since it was read: say what it is now
        raise _refusal(job, action)
    Event.objects.create(
        job=job, kind=EventKind.STATE, message=f"{job.state} -> {target} ({action})", worker=actor_name(user)
    )
    log.info(
        "job state changed",
        extra={
            "event": "job_state",
            "job": job.id,
            "job_name": job.name,
            "previous": job.state,
            "state": target,
            "user": actor_name(user),
        },
    )
    job.refresh_from_db()
    return job


def actor_name(user) -> str:
    return user.get_username() if user is not None and getattr(user, "is_authenticated", False) else ""


def pause(job_id: int, user=None) -> Job:
    job = get_job(job_id)
    return _transition(job_id, JobAction.PAUSE, JobState.PAUSED, user, resume_state=job.state)


def resume(job_id: int, user=None) -> Job:
    job = get_job(job_id)
    return _transition(job_id, JobAction.RESUME, job.resume_state or JobState.READY, user, resume_state="")


def cancel(job_id: int, user=None) -> Job:
    # The database's clock, as mark_running's: the timeline draws leases against it.
    return _transition(job_id, JobAction.CANCEL, JobState.CANCELLED, user, finished_at=ServiceNow())


def check_allows(job: Job, action: str) -> None:
    """Raises InvalidTransition unless the job's state allows ``action`` (models.ACTIONS)."""
    if not job.allows(action):
        raise _refusal(job, action)


def _refusal(job: Job, action: str) -> InvalidTransition:
    return InvalidTransition(f"cannot {action} job {job.name!r}: it is {job.state}")


def _last_action(job: Job, action: str) -> str:
    """`` by WHO at WHEN`` of the job's latest ``action`` (from its state events), as its workers are told."""
    event = (
        Event.objects.filter(job=job, kind=EventKind.STATE, message__endswith=f"({action})")
        .order_by("-at", "-id")
        .first()
    )
    who = f" by {event.worker}" if event is not None and event.worker else ""
    when = (event.at if event is not None else job.updated_at).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{who} at {when}"


def cancellation_message(job: Job) -> str:
    """Who cancelled the job and when, as its workers are told."""
    return (
        f"job {job.name!r} was cancelled{_last_action(job, JobAction.CANCEL)}; its unread items will not be handed out"
    )


def pause_message(job: Job) -> str:
    """Who paused the job and when, as its waiting workers are told."""
    return f"job {job.name!r} was paused{_last_action(job, JobAction.PAUSE)}; takes wait until it is resumed"


def mark_running(job_id: int) -> None:
    # The database's clock, which stamps every lease and completion: the
    # timeline compares them with it (a web host's clock may differ).
    if Job.objects.filter(pk=job_id, state=JobState.READY).update(state=JobState.RUNNING, started_at=ServiceNow()):
        log.info("job running", extra={"event": "job_state", "job": job_id, "previous": "ready", "state": "running"})


def mark_done(job_id: int) -> None:
    """A take found nothing left for it: the job is done if nothing is left in the whole job.

    Guarded as a standalone completion's finish is: a take may see only part
    of the job (a synchronous rank reading one epoch alone), and finishing on
    its word ended the job while other epochs' items were held and pending.
    """
    finish_if_done(job_id)


def finish_if_done(job_id: int) -> bool:
    """Marks the job done if nothing is left to hand out or to finish (after a standalone complete or fail).

    One guarded statement, read from the partial indexes: a take that finds
    the job exhausted does the same through mark_done.
    """
    finished = bool(sql.run("finish_if_done", {"job": job_id}))
    if finished:
        _record_done(job_id)
    return finished


def _record_done(job_id: int) -> None:
    Event.objects.create(job_id=job_id, kind=EventKind.STATE, message="running -> done (every item done or failed)")
    log.info("job done", extra={"event": "job_state", "job": job_id, "previous": "running", "state": "done"})
