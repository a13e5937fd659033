import time

import pytest

from ..sdk.conftest import sdk_env  # noqa: F401  (the SDK tests' environment fixture)
from ..support import wait_until
from .pg_sources import source_database  # noqa: F401  (defines the tests' Postgres connections, on import)


@pytest.fixture
def make_job(live_api, celery_worker, job_name):
    """Creates a job through the API and waits until slicing has ended (ready or failed)."""

    def create(works, num_slices, **fields):
        api = live_api("worker")
        response = api.post(
            "/api/v1/jobs/",
            {"name": job_name, "works": [str(w) for w in works], "num_slices": num_slices, "shuffle": False, **fields},
        )
        assert response.status_code == 201, response.text
        job = response.json()
        assert job["state"] == "slicing"
        return wait_until(lambda: _finished(api, job["id"]), 60, 0.1, "slicing to finish")

    return create


def _finished(api, job_id):
    job = api.get(f"/api/v1/jobs/{job_id}/").json()
    return job if job["state"] not in ("slicing",) else None


def drain(api, job_id):
    """Every lease of the job: (item, offset) pairs, completing each."""
    leases, held = [], []
    while True:
        result = api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "reader", "count": 50, "complete": held}).json()
        leases += [(lease["item"], lease["offset"]) for lease in result["leases"]]
        held = [{"id": lease["id"], "token": lease["token"]} for lease in result["leases"]]
        if result["exhausted"]:
            return leases
        if not result["leases"]:
            time.sleep(result["retry_after"] or 0.05)  # a reader's pause when nothing came, as the server asks
