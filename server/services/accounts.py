"""Users, roles and API tokens.

A user's role is one of the groups ``viewer``, ``worker``, ``admin``
(superusers are admins). An API token carries its own role, at most its
user's, so an admin can hand a training cluster a token that can only lease;
a user demoted later takes the role of its tokens down with it (the token's
``effective_role``, checked whenever the token cache refreshes). A token may
also be limited to jobs by name patterns (server/callers.py).

Tokens are made and revoked by ``manage.py create_token``/``revoke_token``
and by admins through the API (``issue_token``, ``revoke_by_id``). Each
change is recorded without the key: a log line (``token_created``,
``token_revoked``) and, when an admin made it, an entry in the admin site's
history of the token (Django's LogEntry), where revocations made in the
admin site are recorded too.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import secrets
import time
from datetime import timedelta

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.db.models import Q

from .. import clock
from ..callers import check_patterns
from ..errors import InvalidInput, InvalidTransition, NotFound, TokenInUse, UserConflict
from ..models import ROLE_RANK, ApiToken, Role

log = logging.getLogger("shardline.accounts")

KEY_PREFIX = "shl_"
STORED_PREFIX = 10  # characters of a key kept in clear, to recognise it
MIN_PREFIX = len(KEY_PREFIX) + 4  # shortest prefix revoke_token accepts: a few random characters
# Postgres channel on which a revocation is announced to every server
# process (server/waiting.py listens): the payload is the key's SHA-256, as
# stored, never the key.
TOKEN_CHANNEL = "shardline_token"


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
    user,
    role: str,
    name: str = "",
    expires_in_days: int | None = None,
    jobs: list[str] | None = None,
    by=None,
) -> tuple[ApiToken, str]:
    """Creates an API token, limited to the jobs named by ``jobs`` patterns if given; returns (token, key).

    The key exists only in this return value. ``by``: the admin who asked (recorded), None for manage.py.
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
    expires_at = clock.now() + timedelta(days=expires_in_days) if expires_in_days else None
    token = ApiToken.objects.create(
        user=user,
        role=role,
        name=name,
        prefix=key[:STORED_PREFIX],
        key_hash=hash_key(key),
        expires_at=expires_at,
        jobs=jobs,
    )
    _record(token, "created", ADDITION, f"role {role}, jobs {', '.join(jobs) if jobs else 'all'}", by)
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
    return _revoke(matches[0], by=None)


def issue_token(
    by, username: str, role: str, *, name: str = "", jobs: list[str] | None = None, expires_in_days: int | None = None
) -> tuple[ApiToken, str, bool]:
    """An admin's new token for ``username``: (token, key, whether the user was created).

    A missing user is created with ``role`` (as ``manage.py create_token``
    does); an existing one keeps its role, which caps the token's (a higher
    role, or a deactivated user, is a UserConflict naming the field). A
    refusal changes nothing.
    """
    try:
        jobs = check_patterns(jobs or [])
    except ValueError as exc:
        raise InvalidInput(str(exc), fields={"jobs": [str(exc)]}) from None
    with transaction.atomic():
        user, created = ensure_user(username, role)
        user_role = role_of_user(user)
        if not user.is_active or user_role is None:
            why = "is deactivated" if not user.is_active else "has no role (give it one in the admin site)"
            raise UserConflict(f"user {username!r} {why}; its tokens would not work", "user")
        if ROLE_RANK[Role(role)] > ROLE_RANK[Role(user_role)]:
            raise UserConflict(
                f"user {username!r} has role {user_role}; a token cannot have more than its user", "role"
            )
        token, key = create_token(user, role, name=name, expires_in_days=expires_in_days, jobs=jobs, by=by)
    return token, key, created


def revoke_by_id(
    token_id: int, by, using: ApiToken | None = None, confirmed: bool = False, via: str = "through the API"
) -> ApiToken:
    """Revokes token ``token_id`` for admin ``by``, whose request authenticated with ``using`` (None: a session).

    Revoking ``using`` itself locks the caller out of whatever it scripts
    with that key, so it needs ``confirmed``: a mistyped id is refused, not
    obeyed. ``via`` says where in the token's history (the API, the admin site).
    """
    with transaction.atomic():
        token = ApiToken.objects.select_for_update(of=("self",)).select_related("user").filter(pk=token_id).first()
        if token is None:
            raise NotFound(f"no token with id {token_id}")
        if token.revoked_at is not None:
            raise InvalidTransition(f"token {token_id} was already revoked at {token.revoked_at.isoformat()}")
        if using is not None and using.pk == token.pk and not confirmed:
            raise TokenInUse(
                f"token {token_id} is the one this request is made with: revoking it ends your own access "
                "through it; send current: true (shardline tokens revoke --current) to revoke it anyway"
            )
        return _revoke(token, by, via)


def _revoke(token: ApiToken, by, via: str = "through the API") -> ApiToken:
    with transaction.atomic():
        token.revoked_at = clock.now()
        token.save(update_fields=["revoked_at"])
        _record(token, "revoked", CHANGE, "", by, via)
        # Every server process drops the token from its cache and its parked
        # takes when this commits (Postgres sends the notification then), so
        # the revocation takes effect at once, not after the cache's seconds.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [TOKEN_CHANNEL, token.key_hash])
        transaction.on_commit(lambda: forget(token.key_hash))
    return token


def _record(token: ApiToken, action: str, flag: int, detail: str, by, via: str = "through the API") -> None:
    """The audit of a token change: a log line, and the admin's entry in the token's history. Never the key."""
    extra = {"event": f"token_{action}", "user": token.user.get_username(), "role": token.role, "token_id": token.pk}
    if by is not None:
        extra["by"] = by.get_username()
        LogEntry.objects.log_actions(by.pk, [token], flag, f"{action} {via}" + (f": {detail}" if detail else ""))
    log.info(f"api token {action}", extra=extra)


# A used token's last_used_at is written at most this often, so that
# authentication adds no write to most requests on the lease hot path.
LAST_USED_RESOLUTION = timedelta(minutes=1)

# Recently seen tokens, by key hash: the lease hot path then makes no query to
# authenticate. A revocation takes effect at once (announced to every process,
# which forgets the token), an expiry too (checked on every use); a demoted or
# deactivated user's tokens follow within SHARDLINE_TOKEN_CACHE_SECONDS (0
# turns the cache off).
_cache: dict[str, tuple[float, ApiToken]] = {}
_CACHE_LIMIT = 10_000
# Moves on every forget(): a lookup that read the database before a
# revocation was announced does not put what it read into the cache after it.
_forgotten = itertools.count()
_generation = next(_forgotten)


def forget(digest: str | None) -> None:
    """Drops the token of this key hash (None: every token) from this process's cache: its next use reads the database."""
    global _generation
    _generation = next(_forgotten)
    if digest is None:
        _cache.clear()
    else:
        _cache.pop(digest, None)


def live_digests(digests: set[str]) -> set[str]:
    """Which of these key hashes belong to tokens that authenticate now (authenticate_key's checks, one query)."""
    now = clock.now()
    return set(
        ApiToken.objects.filter(key_hash__in=digests, revoked_at__isnull=True, user__is_active=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .values_list("key_hash", flat=True)
    )


def authenticate_key(key: str) -> ApiToken | None:
    from django.conf import settings

    digest = hash_key(key)
    ttl = settings.SHARDLINE_TOKEN_CACHE_SECONDS
    now = clock.now()
    cached = _cache.get(digest)
    if cached is not None and time.monotonic() - cached[0] < ttl:
        token = cached[1]
    else:
        generation = _generation
        token = ApiToken.objects.select_related("user").filter(key_hash=digest).first()
        if token is None or token.revoked_at is not None or not token.user.is_active:
            _cache.pop(digest, None)
            return None
        # Not a field: what the token may do now, were its user demoted since it was made.
        token.effective_role = capped_role(token.role, role_of_user(token.user))
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        if ttl > 0 and generation == _generation:
            if len(_cache) >= _CACHE_LIMIT:
                _cache.clear()
            _cache[digest] = (time.monotonic(), token)
    if token.expires_at is not None and token.expires_at <= now:
        return None
    return token
