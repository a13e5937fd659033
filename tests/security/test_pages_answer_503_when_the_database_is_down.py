"""Dashboard pages are plain Django views: a database outage there is a 503 too, and the admin signs in through the throttled login."""

import pytest
from django.db import OperationalError
from django.test import RequestFactory

from server.middleware import DatabaseUnavailableMiddleware


def failing_view(request):
    raise OperationalError("server closed the connection unexpectedly")


@pytest.mark.parametrize("accept, kind", [("text/html", "text/html"), ("application/json", "application/json")])
def test_a_database_error_in_a_page_is_a_503_with_retry_after(accept, kind):
    request = RequestFactory().get("/", HTTP_ACCEPT=accept)
    middleware = DatabaseUnavailableMiddleware(failing_view)
    try:
        failing_view(request)
    except OperationalError as exc:
        response = middleware.process_exception(request, exc)
    assert response.status_code == 503 and response["Retry-After"] == "1"
    assert response["Content-Type"].startswith(kind)
    assert middleware.process_exception(request, ValueError("a bug")) is None  # anything else stays a real error


def test_the_admin_login_goes_through_the_throttled_login_page(client):
    response = client.get("/admin/login/?next=/admin/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/admin/"


@pytest.mark.django_db
def test_a_page_whose_query_fails_answers_503(client, monkeypatch):
    from django.contrib.auth import get_user_model

    from server import selectors

    admin = get_user_model().objects.create_superuser("outage-admin", "", "pw-for-tests-only")
    client.force_login(admin)

    def unreachable(*args, **kwargs):
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(selectors, "jobs", unreachable)  # the database going away mid-request
    response = client.get("/")
    assert response.status_code == 503 and b"unavailable" in response.content
