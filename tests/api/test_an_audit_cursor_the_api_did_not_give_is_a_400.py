"""The audit's ?cursor= is opaque: one the API did not give (a forged position, garbage) is a 400, never a 500."""

import base64

import pytest

from .helpers import create_job

pytestmark = pytest.mark.django_db


def cursor(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    "value",
    [cursor("p=abc"), cursor("p=-1"), cursor(f"p={2**63}"), cursor("p=1&o=x"), cursor("r=x"), "é"],
)
def test_a_forged_cursor_is_refused(viewer_client, worker_client, value):
    job = create_job(worker_client, "cursor-job", works=["/a", "/b"])
    response = viewer_client.get(f"/api/v1/jobs/{job['id']}/items/", {"cursor": value})
    assert response.status_code == 400, response.content
    assert "cursor" in response.json()["fields"]


def test_the_cursors_the_api_gives_still_page_through(viewer_client, worker_client):
    job = create_job(worker_client, "cursor-pages", works=[f"/{i}" for i in range(5)])
    url, seen = f"/api/v1/jobs/{job['id']}/items/?page_size=2", []
    while url:
        page = viewer_client.get(url).json()
        seen += [row["item"] for row in page["results"]]
        url = page["next"]
    assert sorted(seen) == [f"/{i}" for i in range(5)]
