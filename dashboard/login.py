"""The login form, throttled against password guessing.

Failed logins are counted in the ``throttle`` cache (Redis in deployments, so
every web replica shares the counts; a file cache on a single machine), twice:

- per (user name, client address): after SHARDLINE_LOGIN_MAX_FAILURES
  failures within SHARDLINE_LOGIN_WINDOW_SECONDS, that pair is refused. The
  name is counted as Django matches it to an account (NFKC-normalised, see
  ``AbstractBaseUser.normalize_username``), and case-folded: ``ｖuser`` and
  ``𝐯user`` are ``vuser``, not three budgets of guesses.
- per client address over all names: after
  SHARDLINE_LOGIN_MAX_FAILURES_PER_ADDRESS, the address is refused, so one
  machine cannot spread guesses over many names (or spellings of one).

A refusal holds, without checking the password, until its window ends. A
success clears its pair's count, not its address's: an attacker with one
account of its own must not reset its budget by signing in.
"""

from __future__ import annotations

import hashlib
import logging
import time

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.cache import caches

log = logging.getLogger("shardline.accounts")


def _address(request) -> str:
    address = request.META.get("REMOTE_ADDR", "")
    if getattr(settings, "SECURE_PROXY_SSL_HEADER", None):
        # Behind the proxy, the client is the first X-Forwarded-For address.
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")[0].strip()
        address = forwarded or address
    return address


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def normalised(username: str) -> str:
    """The name as it picks an account: NFKC (as Django's user model), stripped, case-folded."""
    return AbstractBaseUser.normalize_username(username).strip().casefold()


def _keys(request, username: str) -> tuple[str, str]:
    address = _address(request)
    return f"login-failures:{_digest(normalised(username), address)}", f"login-failures-address:{_digest(address)}"


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
        pair, address = _keys(request, request.POST.get("username", ""))
        if _failures(pair) >= settings.SHARDLINE_LOGIN_MAX_FAILURES:
            return self._throttled("for this user name from your address")
        if _failures(address) >= settings.SHARDLINE_LOGIN_MAX_FAILURES_PER_ADDRESS:
            return self._throttled("from your address")
        self._throttle_keys = (pair, address)
        return super().post(request, *args, **kwargs)

    def _throttled(self, scope: str):
        minutes = max(1, round(settings.SHARDLINE_LOGIN_WINDOW_SECONDS / 60))
        log.warning("login throttled", extra={"event": "login_throttled"})
        context = self.get_context_data(
            form=self.get_form_class()(self.request, data=None),
            throttled=(
                f"Too many failed logins {scope}. "
                f"Try again in up to {minutes} minute{'s' if minutes != 1 else ''}, "
                f"or ask an administrator to reset your password."
            ),
        )
        return self.render_to_response(context, status=429)

    def form_invalid(self, form):
        try:
            for key in self._throttle_keys:
                _count_failure(key)
        except Exception:
            log.warning("login throttle unavailable", extra={"event": "throttle_unavailable"})
        log.info("login failed", extra={"event": "login_failed"})
        return super().form_invalid(form)

    def form_valid(self, form):
        try:
            caches["throttle"].delete(self._throttle_keys[0])
        except Exception:
            log.warning("login throttle unavailable", extra={"event": "throttle_unavailable"})
        return super().form_valid(form)
