"""The server's own database is never a table work, unless an admin's connection definition says so.

The attack (issue 25): ``postgresql://<the server's database>?table=public.django_session``
with ``num_slices`` 1000 made every lease carry a session key. Now a work can
only name a connection; a connection that reaches the server's own database is
refused at creation when its address says so (with or without data roots),
and by the real Celery slicer when only the database itself can tell (another
spelling of the address), before a row is read. ``allow_own_database=1`` in
a definition is the admin's explicit yes.
"""

import uuid

import pytest

from ..slicing.pg_sources import CONNECTIONS  # noqa: F401  (defines the connections, on import)
from ..support import Api, ServerProcess, wait_until

SESSIONS = "public.django_session"


def create(api, work, **fields):
    return api.post(
        "/api/v1/jobs/", {"name": f"own-{uuid.uuid4().hex[:10]}", "works": [work], "num_slices": 1000, **fields}
    )


def settled(api, job_id):
    return wait_until(
        lambda: (lambda j: j if j["state"] != "slicing" else None)(api.get(f"/api/v1/jobs/{job_id}/").json()),
        60,
        0.1,
        "slicing to end",
    )


def test_a_connection_to_the_servers_own_database_is_a_400_naming_it(live_api):
    response = create(live_api("worker"), f"postgresql://itself?table={SESSIONS}")
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert "connection 'itself' reaches the server's own database" in message
    assert "allow_own_database" in message


def test_without_data_roots_it_is_refused_the_same(test_database_url, live_keys):
    server = ServerProcess(test_database_url, workers=1, extra_env={"SHARDLINE_DATA_ROOTS": ""}).start()
    try:
        response = create(Api(server.url, live_keys["worker"]), f"postgresql://itself?table={SESSIONS}")
        assert response.status_code == 400, response.text
        assert "reaches the server's own database" in response.json()["message"]
    finally:
        server.stop()


@pytest.mark.skipif("ALIAS" not in CONNECTIONS, reason="needs the test database over TCP at 127.0.0.1")
def test_another_spelling_of_its_address_is_refused_by_the_slicer_before_a_row_is_read(live_api, celery_worker):
    api = live_api("worker")
    response = create(api, f"postgresql://alias?table={SESSIONS}")
    assert response.status_code == 201, response.text  # 127.1 is not the server's address as written
    job = settled(api, response.json()["id"])
    assert job["state"] == "failed"
    assert "connection 'alias' reaches the server's own database" in job["error"]
    assert job["units_count"] == 0 and job["tables"] in (None, [])
    taken = api.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "w", "count": 10}).json()
    assert not taken.get("leases")  # a failed job hands nothing out


def test_a_definition_that_allows_it_is_the_admins_explicit_yes(live_api, celery_worker):
    api = live_api("worker")
    response = create(api, "postgresql://trusted_self?table=public.django_migrations", num_slices=2)
    assert response.status_code == 201, response.text
    job = settled(api, response.json()["id"])
    assert job["state"] == "ready", job["error"]
    assert job["tables"][0]["rows"] > 0
