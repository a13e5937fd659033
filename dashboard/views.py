"""Dashboard pages: read through selectors, change through services. Nothing else."""

from __future__ import annotations

import re
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from server import clock, progress, selectors
from server.errors import InvalidTransition, JobSpecConflict, NotFound
from server.models import FINAL_STATES, ROLE_RANK, JobAction, JobState, Role
from server.services import jobs as job_service
from server.services import retries, snapshots
from server.services.accounts import role_of_user
from server.services.jobs import JobSpec

from .forms import JOB_SORT_COLUMNS, AuditFilterForm, JobForm, JobsFilterForm
from .presenters import (
    CONNECT_MAX_WORKS,
    connect_snippet,
    epoch_bars,
    group_runs,
    item_timeline,
    job_row,
    throughput_chart,
    timeline_chart,
)

PAGE_SIZE = 25


def _role(request) -> str | None:
    return role_of_user(request.user)


def _can(request, role: str) -> bool:
    current = _role(request)
    return current is not None and ROLE_RANK[Role(current)] >= ROLE_RANK[Role(role)]


def _require(request, role: str) -> None:
    if not _can(request, role):
        raise PermissionDenied(f"this needs the {role} role")


def _job_or_404(job_id: int):
    """The job, as the jobs list reads it (with ``elapsed``)."""
    job = selectors.jobs().filter(pk=job_id).first()
    if job is None:
        raise Http404("no such job")
    return job


def _page_number(request) -> int:
    try:
        return max(1, int(request.GET.get("page", 1)))
    except ValueError:
        return 1


def _sort_header(column: str, sort: str, shown: dict) -> dict:
    """A column header's link (ascending first; descending first for times) and its arrow."""
    ascending, descending = column, f"-{column}"
    first = descending if column in ("created", "elapsed") else ascending
    following = ascending if sort == descending else descending if sort == ascending else first
    arrow = "▲" if sort == ascending else "▼" if sort == descending else ""
    return {"url": "?" + urlencode({**shown, "sort": following}), "arrow": arrow}


def _jobs_context(request) -> tuple[dict, int]:
    """The jobs list's context and status (400 when a filter cannot be applied: it is shown, not dropped)."""
    form = JobsFilterForm(request.GET)
    context = {"form": form, "groups": [], "states": JobState.values, "can_create": _can(request, Role.WORKER)}
    if not form.is_valid():
        return context, 400
    data = form.cleaned_data
    state, search, sort, page = data["state"], data["q"].strip(), data["sort"] or "-created", data["page"] or 1
    page_jobs = list(selectors.jobs(state or None, search or None, sort)[(page - 1) * PAGE_SIZE : page * PAGE_SIZE + 1])
    has_next = len(page_jobs) > PAGE_SIZE
    page_jobs = page_jobs[:PAGE_SIZE]
    progresses = progress.of_jobs(page_jobs)
    shown = {
        key: value
        for key, value in (("q", search), ("state", state), ("sort", sort if sort != "-created" else ""))
        if value
    }
    context.update(
        groups=group_runs([job_row(progresses[job.id]) for job in page_jobs]),
        state=state,
        search=search,
        sort=sort,
        query=urlencode(shown),
        sort_headers={column: _sort_header(column, sort, shown) for column in JOB_SORT_COLUMNS},
        page=page,
        has_next=has_next,
    )
    return context, 200


@login_required
def jobs_list(request):
    _require(request, Role.VIEWER)
    context, status = _jobs_context(request)
    return render(request, "dashboard/jobs_list.html", context, status=status)


@login_required
def jobs_table(request):
    _require(request, Role.VIEWER)
    context, status = _jobs_context(request)
    return render(request, "dashboard/_jobs_table.html", context, status=status)


@login_required
def job_create(request):
    _require(request, Role.WORKER)
    form = JobForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            job, created = job_service.create_or_attach(form.spec, request.user)
        except JobSpecConflict as exc:
            form.add_error("name", exc.message)
        else:
            if not created:
                messages.info(request, f"A job named {job.name} with this spec already exists: this is it.")
            return redirect("dashboard:job", job_id=job.id)
    return render(request, "dashboard/job_create.html", {"form": form}, status=400 if form.errors else 200)


def _job_context(request, job) -> dict:
    job_progress = progress.of(job)
    return {
        "job": job,
        "summary": job_row(job_progress),
        "epochs": epoch_bars(job_progress.epochs),
        "chart": throughput_chart(selectors.throughput(job, minutes=31)),  # 30 complete minutes and the current one
        "workers": selectors.workers_with_health(job),
        "stalls": selectors.data_stalls(job),
        "failures": selectors.recent_failures(job),
        "splits": selectors.recent_splits(job),
        "can_act": _can(request, Role.ADMIN),
        "actions": _actions(job, job_progress.failed),
        # Who cancelled it and when, as its workers are told (from the job's events).
        "cancelled": job_service.cancellation_message(job) if job.state == JobState.CANCELLED else None,
        # What its waiting workers are told after a minute of slicing, and the job's warnings.
        "slicing_stalled": job.slicing_stalled(clock.now()),
        "warnings": job.warnings,
        "snapshots": list(snapshots.list_for(job)[:10]),
        "restores": list(snapshots.restores_for(job)[:5]),
    }


def _actions(job, failed: int) -> list[tuple[str, str]]:
    # Restore has its own button per snapshot; retry is offered only when something failed.
    hidden = {JobAction.RESTORE} | ({JobAction.RETRY} if not failed else set())
    return [(action, JobAction(action).label) for action in job.actions if action not in hidden]


# A slice's range in its item (formats.slice_item): what slicing added to the work.
_SLICE_RANGE = re.compile(r"[?&]start=\d+&end=\d+(?=#format=|$)")
# Past this many slices the page does not read them all back to find the works.
CONNECT_MAX_UNITS = 20_000


def _works_of(job, whole: bool) -> list[str] | None:
    """The works the job was created with, less its prefix, or None when the server cannot tell them.

    Until slicing replaces them the units are the works themselves (only the
    first few are read unless ``whole``). A sliced job keeps only the works'
    digest: its slices, folded back into files, are the works when they hash
    to it (not when a directory, a glob or a table was expanded).
    """
    prefix = job.prefix or ""
    units_are_works = job.state == JobState.SLICING or job.resume_state == JobState.SLICING
    units_are_works = units_are_works or not (job.num_slices or job.tables)
    if units_are_works:
        units = selectors.unit_names(job, limit=job.works_count if whole else CONNECT_MAX_WORKS + 1)
        return [unit[len(prefix) :] if unit.startswith(prefix) else unit for unit in units]
    if job.units_count > CONNECT_MAX_UNITS:
        return None
    works: list[str] = []
    for unit in selectors.unit_names(job, limit=job.units_count):
        work = _SLICE_RANGE.sub("", unit, count=1)
        if not work.startswith(prefix):
            return None
        if not works or works[-1] != work[len(prefix) :]:
            works.append(work[len(prefix) :])
    if JobSpec(name=job.name, works=works).works_digest != job.spec.get("works_digest"):
        return None
    return works


@login_required
def job_detail(request, job_id: int):
    _require(request, Role.VIEWER)
    job = _job_or_404(job_id)
    connect = None
    if job.state not in FINAL_STATES:
        works = _works_of(job, whole=False)
        works_url = request.build_absolute_uri(reverse("dashboard:job-works", args=[job.id]))
        connect = connect_snippet(job, works, request.build_absolute_uri("/").rstrip("/"), works_url)
        connect["works_url"] = works_url if works is not None and len(works) > CONNECT_MAX_WORKS else None
    return render(
        request,
        "dashboard/job_detail.html",
        {**_job_context(request, job), **_timeline_context(job), "connect": connect},
    )


@login_required
def job_works(request, job_id: int):
    """works.json: the list a training script passes to attach to this job (the snippet reads it)."""
    _require(request, Role.VIEWER)
    job = _job_or_404(job_id)
    works = _works_of(job, whole=True)
    if works is None:
        raise Http404("the server keeps only a digest of this job's works")
    response = JsonResponse(works, safe=False, json_dumps_params={"indent": 0})
    response["Content-Disposition"] = 'attachment; filename="works.json"'
    return response


def _timeline_context(job) -> dict:
    return {
        "job": job,
        "timeline": timeline_chart(selectors.timeline(job), ended=job.state in FINAL_STATES),
        "holdings": selectors.holdings(job),
    }


@login_required
def job_timeline(request, job_id: int):
    _require(request, Role.VIEWER)
    return render(request, "dashboard/_timeline.html", _timeline_context(_job_or_404(job_id)))


@login_required
def job_live(request, job_id: int):
    _require(request, Role.VIEWER)
    return render(request, "dashboard/_job_live.html", _job_context(request, _job_or_404(job_id)))


STATE_CHANGES = {
    JobAction.PAUSE: job_service.pause,
    JobAction.RESUME: job_service.resume,
    JobAction.CANCEL: job_service.cancel,
}


@login_required
@require_POST
def job_action(request, job_id: int, action: str):
    _require(request, Role.ADMIN)
    job = _job_or_404(job_id)
    try:
        if action == JobAction.RETRY:
            count = retries.retry_failed(job.id, request.user)
            messages.success(request, f"{count} failed item{'s' if count != 1 else ''} put back to pending.")
        elif action in STATE_CHANGES:
            STATE_CHANGES[action](job.id, request.user)
            messages.success(request, f"Job {job.name}: {action} done.")
        else:
            raise Http404("no such action")
    except InvalidTransition as exc:
        messages.error(request, exc.message)
    return redirect("dashboard:job", job_id=job.id)


@login_required
@require_POST
def snapshot_restore(request, job_id: int, snapshot_id: int):
    _require(request, Role.ADMIN)
    job = _job_or_404(job_id)
    try:
        result = snapshots.restore(job.id, snapshot_id, worker=request.user.get_username())
    except NotFound:
        raise Http404("no such snapshot") from None
    except InvalidTransition as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            f"Restored snapshot {snapshot_id}: {result.reopened} completed items back to pending, "
            f"{result.fenced} leases taken back."
            if not result.repeated
            else f"Snapshot {snapshot_id} was already restored; nothing changed.",
        )
    return redirect("dashboard:job", job_id=job.id)


@login_required
def audit(request, job_id: int):
    _require(request, Role.VIEWER)
    job = _job_or_404(job_id)
    form = AuditFilterForm(request.GET)
    context = {"job": job, "form": form, "rows": [], "states": selectors.AUDIT_STATES}
    if not form.is_valid():
        # A filter that cannot be applied is said, not silently dropped.
        return render(request, "dashboard/audit.html", context, status=400)
    filters = form.filters()
    page = form.cleaned_data["page"] or 1
    rows, has_next = selectors.audit_page(job, page=page, **filters)
    shown = {key: value for key, value in filters.items() if value is not None}
    context.update(
        rows=rows,
        page=page,
        has_next=has_next,
        filters=shown,
        query=urlencode(shown),
        csv_url=reverse("job-items", args=[job.id]) + "?" + urlencode({**shown, "format": "csv"}),
    )
    return render(request, "dashboard/audit.html", context)


@login_required
def item_detail(request, job_id: int, item_id: int):
    _require(request, Role.VIEWER)
    job = _job_or_404(job_id)
    item = selectors.items(job).filter(pk=item_id).first()
    if item is None:
        raise Http404("no such item in this job")
    return render(
        request,
        "dashboard/item.html",
        {
            "job": job,
            "item": item,
            "history": item_timeline(
                snapshots.item_history(job.id, item.id)["history"], selectors.item_events(job, item.id)
            ),
        },
    )
