"""Typed helpers that read settings from environment variables.

Every setting of the project comes from the environment; these helpers give a
clear error naming the variable when a value cannot be parsed, instead of a
traceback from deep inside Django.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qs, unquote, urlsplit


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
