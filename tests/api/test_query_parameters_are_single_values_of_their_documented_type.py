"""API query parameters are single values of their documented type: a repeated one, or a page that is not a
positive integer, is a 400 (DRF took the last value, and page=abc for page 1)."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "query, field",
    [
        ("state=done&state=running", "state"),
        ("page=1&page=2", "page"),
        ("page=abc", "page"),
        ("page=-1", "page"),
        ("page_size=0", "page_size"),
        ("page_size=501", "page_size"),
        ("page_size=x", "page_size"),
    ],
)
def test_a_bad_query_parameter_is_a_400_naming_it(viewer_client, query, field):
    response = viewer_client.get(f"/api/v1/jobs/?{query}")
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"]


def test_good_ones_page_as_before(viewer_client):
    response = viewer_client.get("/api/v1/jobs/?page=1&page_size=500&state=done")
    assert response.status_code == 200
    assert viewer_client.get("/api/v1/jobs/?page=9").status_code == 404  # past the last page
