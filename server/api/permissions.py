"""Who may do what: roles (viewer < worker < admin) and a token's job scope.

A request authenticated by token has the token's role, capped by its user's
current role (services/accounts.py); a browser session has its user's role.
A token limited to jobs (``ApiToken.jobs``) sees only those: any other job
is not found, for every endpoint, as if it did not exist. Leases are their
holder's: the lease statements take the caller (server/callers.py).
"""

from django.db.models import Q
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission

from ..callers import Caller
from ..errors import NotFound
from ..models import ROLE_RANK, ApiToken, Job, Role
from ..services import jobs as job_service
from ..services.accounts import role_of_user


def role_of(request) -> str | None:
    if isinstance(request.auth, ApiToken):
        return request.auth.effective_role
    return role_of_user(request.user)


def caller_of(request) -> Caller:
    """The holder the services act for: the request's user, within its token's scope."""
    patterns = request.auth.jobs if isinstance(request.auth, ApiToken) else None
    return Caller.of(request.user.pk, patterns)


def visible_job(request, job_id: int) -> Job:
    """The job, if the caller may see it; NotFound otherwise (the same answer as a job that does not exist)."""
    job = job_service.get_job(job_id)
    if not caller_of(request).sees(job.name):
        raise NotFound(f"no job with id {job_id}")
    return job


def visible_jobs(request, query):
    """``query`` (of jobs) narrowed to the caller's scope, by the same expressions the lease statements match."""
    scope = caller_of(request).scope
    if scope is None:
        return query
    matches = Q()
    for regex in scope:
        matches |= Q(name__regex=regex)
    return query.filter(matches)


def check_may_create(request, name: str) -> None:
    """A scoped token creates or attaches only jobs its patterns name."""
    if not caller_of(request).sees(name):
        patterns = ", ".join(request.auth.jobs)
        raise PermissionDenied(f"this token may create or attach only jobs named {patterns}; {name!r} is not one")


def check_may_restore(request, job: Job) -> None:
    """A restore rolls a job back: its admins, the user who created it, and tokens scoped to it may; nobody else.

    A worker token limited to a job's name family was handed out for that
    job's training (its restarted workers restore from their checkpoints);
    an unscoped worker token of another user was not.
    """
    if role_of(request) == Role.ADMIN:
        return
    if job.created_by_id is not None and job.created_by_id == request.user.pk:
        return
    if isinstance(request.auth, ApiToken) and request.auth.jobs:
        return  # visible_job found the job in the token's scope
    raise PermissionDenied("only an admin, the job's creator or a token scoped to the job may restore its snapshots")


def check_may_replace(request, job_id: int, name: str) -> None:
    """Replacing a job cancels it: who may restore it may (a restarted run's workers restore from its checkpoints).

    Only a job of the new job's name can be replaced; another id is left to
    the service, which refuses it as a spec conflict.
    """
    job = Job.objects.filter(pk=job_id, name=name).first()
    if job is None or not caller_of(request).sees(job.name):
        return
    try:
        check_may_restore(request, job)
    except PermissionDenied:
        raise PermissionDenied("only an admin, the job's creator or a token scoped to the job may replace it") from None


# The one permission table: every route of the API, by URL name, and method ->
# the least role that may call it, and what else is checked of the caller:
#   "scope"    the job named in the URL must be in the token's scope (else 404)
#   "listed"   a list, narrowed to the token's scope
#   "create"   the new job's name must be in the token's scope (else 403)
#   "holder"   the lease must be held by the caller's user, in scope (else 409)
#   "restore"  scope, and an admin, the job's creator or a token scoped to it (else 403)
#   "unscoped" no job in it, and a token limited to jobs may not (else 403): a
#              scoped admin token that manages tokens could make an unscoped one
# A route missing here is refused to everyone, and tests/security's matrix
# (built from the URL conf) fails until it has a rule.
PERMISSIONS: dict[str, dict[str, tuple[Role, str]]] = {
    "job-list": {"GET": (Role.VIEWER, "listed"), "POST": (Role.WORKER, "create")},
    "job-detail": {"GET": (Role.VIEWER, "scope")},
    "job-pause": {"POST": (Role.ADMIN, "scope")},
    "job-resume": {"POST": (Role.ADMIN, "scope")},
    "job-cancel": {"POST": (Role.ADMIN, "scope")},
    "job-retry-failed": {"POST": (Role.ADMIN, "scope")},
    "job-watermarks": {"GET": (Role.VIEWER, "scope")},
    "job-records": {"GET": (Role.VIEWER, "scope")},
    "job-take": {"POST": (Role.WORKER, "scope")},
    # Scope here; the statement takes back only the caller's own leases.
    "job-resume-leases": {"POST": (Role.WORKER, "scope")},
    "job-items": {"GET": (Role.VIEWER, "scope")},
    "item-history": {"GET": (Role.VIEWER, "scope")},
    "job-snapshot": {"POST": (Role.WORKER, "scope")},
    "job-snapshot-restore": {"POST": (Role.WORKER, "restore")},
    "lease-extend-many": {"POST": (Role.WORKER, "holder")},
    "lease-complete-many": {"POST": (Role.WORKER, "holder")},
    "lease-complete": {"POST": (Role.WORKER, "holder")},
    "lease-fail": {"POST": (Role.WORKER, "holder")},
    "lease-release": {"POST": (Role.WORKER, "holder")},
    "lease-extend": {"POST": (Role.WORKER, "holder")},
    "lease-split": {"POST": (Role.WORKER, "holder")},
    "worker-list": {"GET": (Role.VIEWER, "listed")},
    "token-list": {"GET": (Role.ADMIN, "unscoped"), "POST": (Role.ADMIN, "unscoped")},
    "token-revoke": {"POST": (Role.ADMIN, "unscoped")},
}


def rule_of(request) -> tuple[Role, str] | None:
    match = request.resolver_match
    methods = PERMISSIONS.get(match.url_name if match else "", {})
    method = "GET" if request.method in ("HEAD", "OPTIONS") else request.method
    return methods.get(method)


class ByTable(BasePermission):
    """The role and unscoped checks of PERMISSIONS (the scope and holder checks are the views' and the statements')."""

    def has_permission(self, request, view):
        rule = rule_of(request)
        if rule is None:
            if not hasattr(view, request.method.lower()):
                return True  # a method the view does not serve: DRF answers 405 next
            self.message = "no such operation"
            return False
        required, check = rule
        role = role_of(request)
        self.message = f"this action needs the {required.value} role"
        if role is None or ROLE_RANK[Role(role)] < ROLE_RANK[required]:
            return False
        if check == "unscoped" and isinstance(request.auth, ApiToken) and request.auth.jobs:
            self.message = "this action needs a token that is not limited to jobs; this one is limited to " + ", ".join(
                request.auth.jobs
            )
            return False
        return True
