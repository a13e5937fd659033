"""The login form, throttled against password guessing.

Failed logins are counted per (username, client address) in the ``throttle``
cache (Redis in deployments, so every web replica shares the counts; a file
cache on a single machine). After SHARDLINE_LOGIN_MAX_FAILURES failures within
SHARDLINE_LOGIN_WINDOW_SECONDS, that pair is refused, without checking the
password, until the window ends. A success clears the count.
"""

from __future__ import annotations

import hashlib
import logging
import time

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import caches

log = logging.getLogger("shardline.accounts")


def _key(request, username: str) -> str:
    address = request.META.get("REMOTE_ADDR", "")
    if getattr(settings, "SECURE_PROXY_SSL_HEADER", None):
        # Behind the proxy, the client is the first X-Forwarded-For address.
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")[0].strip()
        address = forwarded or address
    digest = hashlib.sha256(f"{username.strip().lower()}\0{address}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"login-failures:{digest}"


def _failures(key: str) -> int:
    try:
        entry = caches["throttle"].get(key)
    except Exception:  # the cache is down: do not lock everybody out
        log.warning("login throttle unavailable", extra={"event": "throttle_unavailable"})
        return 0
    if not entry:
        return 0
    count, started = entry
    return count if time.time() - started < settings.SHARDLINE_LOGIN_WINDOW_SECONDS else 0


def _count_failure(key: str) -> None:
    # (count, start of the window) with an explicit expiry at the window's
    # end: the window does not move with each failure, on every cache backend
    # (a file cache's incr would reset the expiry to its default).
    cache = caches["throttle"]
    window = settings.SHARDLINE_LOGIN_WINDOW_SECONDS
    now = time.time()
    entry = cache.get(key)
    if not entry or now - entry[1] >= window:
        entry = (0, now)
    cache.set(key, (entry[0] + 1, entry[1]), timeout=max(1, int(entry[1] + window - now) + 1))


class ThrottledLoginView(auth_views.LoginView):
    def post(self, request, *args, **kwargs):
        key = _key(request, request.POST.get("username", ""))
        if _failures(key) >= settings.SHARDLINE_LOGIN_MAX_FAILURES:
            minutes = max(1, round(settings.SHARDLINE_LOGIN_WINDOW_SECONDS / 60))
            log.warning("login throttled", extra={"event": "login_throttled"})
            context = self.get_context_data(
                form=self.get_form_class()(request, data=None),
                throttled=(
                    f"Too many failed logins for this user name from your address. "
                    f"Try again in up to {minutes} minute{'s' if minutes != 1 else ''}, "
                    f"or ask an administrator to reset your password."
                ),
            )
            return self.render_to_response(context, status=429)
        self._throttle_key = key
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        try:
            _count_failure(self._throttle_key)
        except Exception:
            log.warning("login throttle unavailable", extra={"event": "throttle_unavailable"})
        log.info("login failed", extra={"event": "login_failed"})
        return super().form_invalid(form)

    def form_valid(self, form):
        try:
            caches["throttle"].delete(self._throttle_key)
        except Exception:
            log.warning("login throttle unavailable", extra={"event": "throttle_unavailable"})
        return super().form_valid(form)
