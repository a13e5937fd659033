"""A method a route does not serve is a 405 with a JSON body, before any permission rule is asked."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/jobs/1/", "/api/v1/leases/1/complete/"])
def test_an_unserved_method_is_a_405(worker_client, path):
    response = worker_client.delete(path)
    assert response.status_code == 405, response.content
    assert response.json()["message"]
