"""API query parameters are single values of their documented type: a repeated one, or a page that is not a
positive integer, is a 400 (DRF took the last value, and page=abc for page 1)."""

import pytest

from .helpers import create_job

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


def test_an_empty_value_is_a_value_not_an_absent_parameter(viewer_client, worker_client, job_name):
    # DRF reads `?format=` from a QueryDict as absent, as an HTML form would:
    # the audit answered JSON to a format its schema does not list.
    response = viewer_client.get("/api/v1/jobs/?state=")
    assert response.status_code == 400, response.content
    assert list(response.json()["fields"]) == ["state"]
    job = create_job(worker_client, job_name, ["/a", "/b"])
    items = f"/api/v1/jobs/{job['id']}/items/"
    for field in ("format", "state", "epoch"):
        response = viewer_client.get(f"{items}?{field}=")
        assert response.status_code == 400, response.content
        assert list(response.json()["fields"]) == [field]
    # The worker filter is a prefix of names: the empty one matches every worker.
    everything = viewer_client.get(items).json()["results"]
    assert len(everything) == 2
    assert viewer_client.get(f"{items}?worker=").json()["results"] == everything
