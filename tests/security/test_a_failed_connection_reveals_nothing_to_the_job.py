"""What a connection attempt found (a refused port, an unknown host, an unknown role) stays in the server's log.

The attack (issue 25): the job's error repeated libpq's message, so a work
with ``&host=`` and ``&port=`` made the slicer a port scanner. Works can no
longer choose an address, and even an admin's connection that fails gives
every job the same sentence naming the connection, whatever libpq said; the
real Celery slicer logs the detail for operators.
"""

import uuid

import pytest

from ..slicing.pg_sources import CONNECTIONS  # noqa: F401  (defines the connections, on import)
from ..support import wait_until

REVEALING = ("refused", "translate", "resolve", "127.0.0.1", "no-such-host", "role", "exist", "port", "FATAL", "time")


@pytest.mark.timeout(90)
def test_every_failed_connection_fails_its_job_with_the_same_sentence_naming_the_connection(live_api, celery_worker):
    api = live_api("worker")
    errors = {}
    for name in ("refused_port", "no_such_host", "no_such_role"):
        body = {"name": f"probe-{uuid.uuid4().hex[:8]}", "works": [f"postgresql://{name}?table=public.t"]}
        job = api.post("/api/v1/jobs/", {**body, "num_slices": 4}).json()
        job = wait_until(
            lambda: (lambda j: j if j["state"] != "slicing" else None)(api.get(f"/api/v1/jobs/{job['id']}/").json()),
            60,
            0.1,
            "slicing to end",
        )
        assert job["state"] == "failed"
        errors[name] = job["error"]
    for name, error in errors.items():
        assert error == (
            f"postgresql://{name}?table=public.t: cannot connect through connection {name!r} "
            "(an admin finds why in the server's log)"
        )
        said = error.replace(f"postgresql://{name}?table=public.t", "").replace(repr(name), "")  # the names' own words
        assert not [word for word in REVEALING if word.lower() in said.lower()], error
