"""Operational endpoints outside the versioned API: health and metrics."""

from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

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
        return JsonResponse({"status": "unavailable", "database": type(exc).__name__}, status=503)
    return JsonResponse({"status": "ok", "database": "ok"})


@require_GET
def prometheus(request):
    try:
        body = metrics.render()
    except Exception as exc:
        return JsonResponse({"status": "unavailable", "database": type(exc).__name__}, status=503)
    return HttpResponse(body, content_type="text/plain; version=0.0.4; charset=utf-8")
