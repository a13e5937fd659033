"""A URL under /api/ that no endpoint serves answers a JSON 404 (or 405 for a method it does not serve)."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path", ["/api/v1/nonexistent", "/api/v1/nonexistent/", "/api/v2/jobs/", "/api/", "/api/v1/jobs/x/"]
)
def test_an_unknown_url_is_a_json_404(viewer_client, path):
    response = viewer_client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == "not_found"


def test_a_method_an_endpoint_does_not_serve_is_answered_in_json(admin_client):
    # DRF answers 405; the permission table (server/api/permissions.py) answers 403 first for a method it has
    # no rule for. Either way the body is the API's JSON error.
    response = admin_client.delete("/api/v1/jobs/")
    assert response.status_code in (403, 405)
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] in ("method_not_allowed", "permission_denied")


def test_pages_outside_the_api_keep_their_html_404(admin_client):
    response = admin_client.get("/no-such-page/")
    assert response.status_code == 404
    assert "text/html" in response["Content-Type"]
