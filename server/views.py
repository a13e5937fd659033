"""Operational endpoints outside the versioned API: health and metrics; JSON 404s and 500s under /api/."""

import hmac

from django.conf import settings
from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from django.views.defaults import page_not_found
from django.views.defaults import server_error as django_server_error

from worker_sdk import __version__

from . import metrics


@require_GET
def healthz(request):
    try:
        with connection.cursor() as cursor:
            # Inline, not sql.run: it probes the connection itself, and must
            # not depend on a prepared statement surviving on it.
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any database failure means "not healthy", with the reason
        return JsonResponse(
            {"status": "unavailable", "database": type(exc).__name__, "version": __version__}, status=503
        )
    return JsonResponse({"status": "ok", "database": "ok", "version": __version__})


@require_GET
def prometheus(request):
    expected = settings.SHARDLINE_METRICS_TOKEN
    if expected:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        # Constant time: how much of a guess matched must not show in the answer's timing.
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected.encode()):
            response = JsonResponse(
                {
                    "error": "not_authenticated",
                    "message": "/metrics needs Authorization: Bearer <SHARDLINE_METRICS_TOKEN>",
                },
                status=401,
            )
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    try:
        body = metrics.render()
    except Exception as exc:
        return JsonResponse({"status": "unavailable", "database": type(exc).__name__}, status=503)
    return HttpResponse(body, content_type="text/plain; version=0.0.4; charset=utf-8")


def not_found(request, exception=None):
    """Django's 404 for a URL no view matched: JSON under /api/ (a client parses every answer), HTML elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "not_found", "message": f"no such endpoint: {request.path}"}, status=404)
    return page_not_found(request, exception)


def server_error(request):
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "server_error", "message": "internal error; it was logged"}, status=500)
    return django_server_error(request)
