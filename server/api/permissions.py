"""Role checks: viewer < worker < admin.

A request authenticated by token has the token's role; a browser session has
its user's role.
"""

from rest_framework.permissions import BasePermission

from ..models import ROLE_RANK, ApiToken, Role
from ..services.accounts import role_of_user


def role_of(request) -> str | None:
    if isinstance(request.auth, ApiToken):
        return request.auth.role
    return role_of_user(request.user)


class _HasRole(BasePermission):
    required = Role.VIEWER

    def has_permission(self, request, view):
        role = role_of(request)
        if role is None:
            return False
        return ROLE_RANK[Role(role)] >= ROLE_RANK[self.required]

    @property
    def message(self):
        return f"this action needs the {self.required.value} role"


class IsViewer(_HasRole):
    required = Role.VIEWER


class IsWorker(_HasRole):
    required = Role.WORKER


class IsAdmin(_HasRole):
    required = Role.ADMIN
