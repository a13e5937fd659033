"""Dashboard pages: read through selectors, change through services. Nothing else."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from server import selectors
from server.errors import InvalidTransition, JobSpecConflict, NotFound
from server.models import ROLE_RANK, ItemState, JobState, Role
from server.services import jobs as job_service
from server.services import retries, snapshots
from server.services.accounts import role_of_user

from .forms import JobForm
from .presenters import epoch_bars, job_row, throughput_chart

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
    try:
        return job_service.get_job(job_id)
    except NotFound:
        raise Http404("no such job") from None


def _page_number(request) -> int:
    try:
        return max(1, int(request.GET.get("page", 1)))
    except ValueError:
        return 1


def _jobs_context(request) -> dict:
    state = request.GET.get("state") or ""
    if state not in JobState.values:
        state = ""
    page = _page_number(request)
    page_jobs = list(selectors.jobs(state or None)[(page - 1) * PAGE_SIZE : page * PAGE_SIZE + 1])
    has_next = len(page_jobs) > PAGE_SIZE
    page_jobs = page_jobs[:PAGE_SIZE]
    summaries = selectors.job_summaries(page_jobs)
    return {
        "rows": [job_row(job, summaries[job.id]) for job in page_jobs],
        "state": state,
        "query": urlencode({"state": state}) if state else "",
        "states": JobState.values,
        "page": page,
        "has_next": has_next,
        "can_create": _can(request, Role.WORKER),
    }


@login_required
def jobs_list(request):
    _require(request, Role.VIEWER)
    return render(request, "dashboard/jobs_list.html", _jobs_context(request))


@login_required
def jobs_table(request):
    _require(request, Role.VIEWER)
    return render(request, "dashboard/_jobs_table.html", _jobs_context(request))


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
    marks = selectors.watermarks(job)
    return {
        "job": job,
        "marks": marks,
        "summary": job_row(job, marks),
        "epochs": epoch_bars(marks["epochs"]),
        "chart": throughput_chart(selectors.throughput(job)),
        "workers": selectors.workers_with_health(job),
        "failures": selectors.recent_failures(job),
        "can_act": _can(request, Role.ADMIN),
        "actions": _actions(job),
        "snapshots": list(snapshots.list_for(job)[:10]),
        "restores": list(snapshots.restores_for(job)[:5]),
    }


def _actions(job) -> list[tuple[str, str]]:
    actions = []
    if job.state in (JobState.SLICING, JobState.READY, JobState.RUNNING):
        actions.append(("pause", "Pause"))
    if job.state == JobState.PAUSED:
        actions.append(("resume", "Resume"))
    if job.state not in (JobState.DONE, JobState.CANCELLED, JobState.FAILED):
        actions.append(("cancel", "Cancel"))
    if job.state in (JobState.READY, JobState.RUNNING, JobState.DONE, JobState.PAUSED):
        actions.append(("retry", "Retry failed items"))
    return actions


@login_required
def job_detail(request, job_id: int):
    _require(request, Role.VIEWER)
    return render(request, "dashboard/job_detail.html", _job_context(request, _job_or_404(job_id)))


@login_required
def job_live(request, job_id: int):
    _require(request, Role.VIEWER)
    return render(request, "dashboard/_job_live.html", _job_context(request, _job_or_404(job_id)))


ACTIONS = {
    "pause": job_service.pause,
    "resume": job_service.resume,
    "cancel": job_service.cancel,
}


@login_required
@require_POST
def job_action(request, job_id: int, action: str):
    _require(request, Role.ADMIN)
    job = _job_or_404(job_id)
    try:
        if action == "retry":
            count = retries.retry_failed(job.id, request.user)
            messages.success(request, f"{count} failed item{'s' if count != 1 else ''} put back to pending.")
        elif action in ACTIONS:
            ACTIONS[action](job.id, request.user)
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
            f"{result.fenced} leases taken back." if not result.repeated else f"Snapshot {snapshot_id} was already restored; nothing changed.",
        )
    return redirect("dashboard:job", job_id=job.id)


@login_required
def audit(request, job_id: int):
    _require(request, Role.VIEWER)
    job = _job_or_404(job_id)
    state = request.GET.get("state") or None
    if state not in ItemState.values:
        state = None
    worker = (request.GET.get("worker") or "").strip() or None
    try:
        epoch = int(request.GET["epoch"]) if request.GET.get("epoch", "") != "" else None
    except ValueError:
        epoch = None
    if epoch is not None and not 0 <= epoch < 2**31:
        epoch = None
    page = _page_number(request)
    rows, has_next = selectors.audit_page(job, state=state, epoch=epoch, worker=worker, page=page)
    filters = {key: value for key, value in (("state", state), ("epoch", epoch), ("worker", worker)) if value is not None}

    return render(
        request,
        "dashboard/audit.html",
        {
            "job": job,
            "rows": rows,
            "page": page,
            "has_next": has_next,
            "filters": filters,
            "query": urlencode(filters),
            "states": ItemState.values,
            "csv_url": reverse("job-items", args=[job.id]) + "?" + urlencode({**filters, "format": "csv"}),
        },
    )
