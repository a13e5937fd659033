"""Users, roles and API tokens.

A user's role is one of the groups ``viewer``, ``worker``, ``admin``
(superusers are admins). An API token carries its own role, at most its
user's, so an admin can hand a training cluster a token that can only lease;
a user demoted later takes the role of its tokens down with it (the token's
``effective_role``, checked whenever the token cache refreshes). A token may
also be limited to jobs by name patterns (server/callers.py).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ..callers import check_patterns
from ..errors import InvalidInput, NotFound
from ..models import ROLE_RANK, ApiToken, Role

log = logging.getLogger("shardline.accounts")

KEY_PREFIX = "shl_"
STORED_PREFIX = 10  # characters of a key kept in clear, to recognise it
MIN_PREFIX = len(KEY_PREFIX) + 4  # shortest prefix revoke_token accepts: a few random characters


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def role_of_user(user) -> str | None:
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.ADMIN
    names = set(user.groups.values_list("name", flat=True))
    for role in (Role.ADMIN, Role.WORKER, Role.VIEWER):
        if role.value in names:
            return role.value
    return None


def set_role(user, role: str) -> None:
    if role not in Role.values:
        raise InvalidInput(f"unknown role {role!r}; choose one of {', '.join(Role.values)}")
    with transaction.atomic():
        groups = {r: Group.objects.get_or_create(name=r)[0] for r in Role.values}
        user.groups.remove(*[g for r, g in groups.items() if r != role])
        user.groups.add(groups[role])


def ensure_user(username: str, role: str):
    """Returns the user, creating it (without a usable password) with ``role`` if missing."""
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
        set_role(user, role)
    return user, created


def capped_role(token_role: str, user_role: str | None) -> str | None:
    """The lower of a token's role and its user's role now (None: the user has none)."""
    if user_role is None:
        return None
    return min(token_role, user_role, key=lambda role: ROLE_RANK[Role(role)])


def create_token(
    user, role: str, name: str = "", expires_in_days: int | None = None, jobs: list[str] | None = None
) -> tuple[ApiToken, str]:
    """Creates an API token, limited to the jobs named by ``jobs`` patterns if given; returns (token, key).

    The key exists only in this return value.
    """
    try:
        jobs = check_patterns(jobs or [])
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    if role not in Role.values:
        raise InvalidInput(f"unknown role {role!r}; choose one of {', '.join(Role.values)}")
    user_role = role_of_user(user)
    if user_role is None or ROLE_RANK[Role(role)] > ROLE_RANK[Role(user_role)]:
        raise InvalidInput(
            f"user {user.get_username()!r} has role {user_role or 'none'}; a token cannot have more ({role})"
        )
    key = KEY_PREFIX + secrets.token_urlsafe(30)
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    token = ApiToken.objects.create(
        user=user,
        role=role,
        name=name,
        prefix=key[:STORED_PREFIX],
        key_hash=hash_key(key),
        expires_at=expires_at,
        jobs=jobs,
    )
    log.info("api token created", extra={"event": "token_created", "user": user.get_username(), "state": role})
    return token, key


def revoke_token(reference: str) -> ApiToken:
    """Revokes one live token named by its id, its whole key, or a prefix of its key that names only it.

    Only the first STORED_PREFIX characters of a key are stored, so a longer
    part of a key that is not all of it cannot be checked, and is refused.
    """
    reference = reference.strip()
    query = ApiToken.objects.filter(revoked_at__isnull=True)
    if reference.isdigit():
        matches = list(query.filter(pk=int(reference)))
    elif len(reference) <= STORED_PREFIX:
        if len(reference) < MIN_PREFIX:
            raise InvalidInput(
                f"give at least {MIN_PREFIX} characters of the key (every key starts with {KEY_PREFIX!r})"
            )
        matches = list(query.filter(prefix__startswith=reference)[:2])
    else:
        matches = list(query.filter(key_hash=hash_key(reference)))
        if not matches and query.filter(prefix=reference[:STORED_PREFIX]).exists():
            raise InvalidInput(
                f"that is not a whole live key, though its first {STORED_PREFIX} characters match one: check the "
                f"key, or give at most its first {STORED_PREFIX} characters (only those are stored)"
            )
    if not matches:
        raise NotFound("no live token with that id, key or key prefix")
    if len(matches) > 1:
        raise InvalidInput(f"{reference!r} is the start of several live keys: give more of the key, or the token's id")
    token = matches[0]
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    log.info("api token revoked", extra={"event": "token_revoked", "user": token.user.get_username()})
    return token


# A used token's last_used_at is written at most this often, so that
# authentication adds no write to most requests on the lease hot path.
LAST_USED_RESOLUTION = timedelta(minutes=1)

# Recently seen tokens, by key hash: the lease hot path then makes no query to
# authenticate. A revocation (or expiry) takes effect within this many seconds
# in every web process (SHARDLINE_TOKEN_CACHE_SECONDS; 0 turns the cache off).
_cache: dict[str, tuple[float, ApiToken]] = {}
_CACHE_LIMIT = 10_000


def live_digests(digests: set[str]) -> set[str]:
    """Which of these key hashes belong to tokens that authenticate now (authenticate_key's checks, one query)."""
    now = timezone.now()
    return set(
        ApiToken.objects.filter(key_hash__in=digests, revoked_at__isnull=True, user__is_active=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .values_list("key_hash", flat=True)
    )


def authenticate_key(key: str) -> ApiToken | None:
    from django.conf import settings

    digest = hash_key(key)
    ttl = settings.SHARDLINE_TOKEN_CACHE_SECONDS
    now = timezone.now()
    cached = _cache.get(digest)
    if cached is not None and time.monotonic() - cached[0] < ttl:
        token = cached[1]
    else:
        token = ApiToken.objects.select_related("user").filter(key_hash=digest).first()
        if token is None or token.revoked_at is not None or not token.user.is_active:
            _cache.pop(digest, None)
            return None
        # Not a field: what the token may do now, were its user demoted since it was made.
        token.effective_role = capped_role(token.role, role_of_user(token.user))
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        if ttl > 0:
            if len(_cache) >= _CACHE_LIMIT:
                _cache.clear()
            _cache[digest] = (time.monotonic(), token)
    if token.expires_at is not None and token.expires_at <= now:
        return None
    return token
