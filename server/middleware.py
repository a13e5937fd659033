"""A database outage answers 503, never a 500, on every page (the API maps it in server/api/errors.py)."""

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse

log = logging.getLogger("shardline.api")

MESSAGE = "The database is unavailable; retry shortly."


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        log.warning("database unavailable", extra={"event": "db_unavailable", "reason": type(exception).__name__})
        if "application/json" in request.headers.get("Accept", ""):
            response = JsonResponse({"error": "unavailable", "message": MESSAGE}, status=503)
        else:
            response = HttpResponse(
                f"<!doctype html><title>Unavailable</title><h1>Shardline is unavailable</h1><p>{MESSAGE}</p>",
                status=503,
            )
        response["Retry-After"] = "1"
        return response


class SingleQueryValuesMiddleware:
    """An API query parameter given twice is a 400: every one is a single value (the schema says so), and
    taking the last one silently would answer a question that was not asked."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            repeated = sorted(name for name, values in request.GET.lists() if len(values) > 1)
            if repeated:
                fields = {name: ["given more than once"] for name in repeated}
                message = "invalid input: " + "; ".join(f"{name}: given more than once" for name in repeated)
                return JsonResponse({"error": "invalid", "message": message, "fields": fields}, status=400)
        return self.get_response(request)
