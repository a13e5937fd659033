"""Typed helpers that read settings from environment variables.

Every setting of the project comes from the environment; these helpers give a
clear error naming the variable when a value cannot be parsed, instead of a
traceback from deep inside Django.
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qs, quote, unquote, urlsplit


class SettingError(ValueError):
    pass


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None else value


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise SettingError(f"{name}={value!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise SettingError(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise SettingError(f"{name}={number} is below the minimum {minimum}")
    if maximum is not None and number > maximum:
        raise SettingError(f"{name}={number} is above the maximum {maximum}")
    return number


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return list(default or [])
    return [part.strip() for part in value.split(",") if part.strip()]


def parse_database_url(url: str) -> dict:
    """Turns ``postgres://user:password@host:port/name?opt=v`` into Django's DATABASES entry.

    A ``host`` query parameter (``?host=/path/to/socket/dir``) selects a Unix socket,
    as libpq does.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        raise SettingError(f"DATABASE_URL must start with postgres:// (got scheme {parts.scheme!r})")
    name = unquote(parts.path.lstrip("/")) or "postgres"
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    host = options.pop("host", None) or unquote(parts.hostname or "")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        "OPTIONS": options,
    }


PG_CONNECTION_PREFIX = "SHARDLINE_PG_CONNECTION_"
# Set in a connection's URL, read by Shardline and removed before libpq sees it.
ALLOW_OWN_DATABASE = "allow_own_database"
_CONNECTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")


def env_pg_connections(environ=None) -> dict[str, dict]:
    """The named Postgres connections table works may use, from ``SHARDLINE_PG_CONNECTION_<NAME>`` variables.

    Each value is a libpq URL with its own credentials
    (``postgresql://slicer:secret@db.internal:5432/warehouse?sslmode=require``);
    ``allow_own_database=1`` in it lets it reach the server's own database.
    Returns ``{name: {"params": libpq keywords, "allow_own_database": bool}}``
    with the name lower-cased (works spell it ``postgresql://name?table=...``).
    The keywords keep ``password`` under its own key, so Django's error
    reports hide it as they hide any setting named like a secret.
    """
    from psycopg import conninfo

    found = {}
    for variable, value in sorted((environ if environ is not None else os.environ).items()):
        if not variable.startswith(PG_CONNECTION_PREFIX):
            continue
        name = variable[len(PG_CONNECTION_PREFIX) :].lower()
        if not _CONNECTION_NAME.fullmatch(name):
            raise SettingError(f"{variable}: a connection name is a letter then letters, digits or '_'")
        parts = urlsplit(value.strip())
        if parts.scheme not in ("postgres", "postgresql"):
            raise SettingError(f"{variable} must be a postgresql:// URL (with the user and password to slice with)")
        query = parse_qs(parts.query, keep_blank_values=True)
        flag = query.pop(ALLOW_OWN_DATABASE, ["0"])[-1].strip().lower()
        if flag not in _TRUE | _FALSE:
            raise SettingError(f"{variable}: {ALLOW_OWN_DATABASE}={flag!r} is not a boolean")
        rest = "&".join(f"{quote(k)}={quote(v)}" for k, vs in query.items() for v in vs)
        try:
            params = conninfo.conninfo_to_dict(parts._replace(query=rest).geturl())
        except Exception as exc:  # libpq's parse error names the part, never a secret's value
            raise SettingError(f"{variable} is not a valid libpq URL ({type(exc).__name__})") from None
        if not params.get("dbname"):
            raise SettingError(f"{variable} must name its database: postgresql://user:password@host:port/DATABASE")
        found[name] = {"params": params, ALLOW_OWN_DATABASE: flag in _TRUE}
    return found
