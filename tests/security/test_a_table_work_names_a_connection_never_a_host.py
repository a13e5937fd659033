"""A Postgres table work names a connection an admin defined, and nothing of where or how to connect.

The attack (issue 25): a worker token creates a job whose work is a table of
any database the server can reach, e.g. its own sessions table, or an
allowed database with ``&dbname=`` / ``&host=`` / ``&port=`` overriding it.
Each is a 400 at creation that names the problem and writes nothing, through
the real server; a work that names a defined connection is sliced by real
Celery, and its leases tell readers where the database is, never who to
connect as or with what password.
"""

import uuid

import psycopg
import pytest

from ..slicing.pg_sources import OWN_DATABASE, SOURCE_DATABASE, source_database, url_of  # noqa: F401  (connections, on import)
from ..support import wait_until

OWN = url_of(OWN_DATABASE)


@pytest.mark.parametrize(
    "work",
    [
        f"{OWN}?table=public.django_session",
        "postgresql://postgres@127.0.0.1:5432/postgres?table=public.django_session",
        f"postgresql://sources?table=public.django_session&dbname={OWN_DATABASE}",
        "postgresql://sources?table=public.django_session&host=127.0.0.1",
        "postgresql://sources?table=public.django_session&port=22",
        "postgresql://sources?table=public.django_session&hostaddr=10.0.0.1",
        "postgresql://sources?table=public.django_session&user=postgres",
        "postgresql://sources?table=public.django_session&service=other",
        "postgresql://sources?table=public.django_session&options=-c%20search_path%3Dpublic",
        "postgresql://sources?table=public.django_session&sslmode=disable",
        "postgresql://sources:5432?table=public.django_session",
        f"postgresql://sources/{OWN_DATABASE}?table=public.django_session",
        "postgresql://postgres@sources?table=public.django_session",
        f"postgres:///{OWN_DATABASE}?table=public.django_session&host=/var/run/postgresql",
    ],
    # The test database's name differs between parallel pytest workers; ids must not.
    ids=lambda work: work.replace(OWN_DATABASE, "OWN"),
)
def test_a_work_with_an_address_or_connection_option_of_its_own_is_a_400_that_writes_nothing(live_api, work):
    api = live_api("worker")
    name = f"probe-{uuid.uuid4().hex[:10]}"
    response = api.post("/api/v1/jobs/", {"name": name, "works": [work], "num_slices": 1000})
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert "works[0]" in message
    assert "names a connection" in message or "refused: a Postgres table work takes table and key only" in message
    listed = api.get("/api/v1/jobs/?page_size=500").json()["results"]  # newest first
    assert name not in {job["name"] for job in listed}


def test_a_connection_nobody_defined_is_a_400_naming_it(live_api):
    response = live_api("worker").post(
        "/api/v1/jobs/", {"name": f"undefined-{uuid.uuid4().hex[:8]}", "works": ["postgresql://payroll?table=t"]}
    )
    assert response.status_code == 400
    assert "no Postgres connection named 'payroll'" in response.json()["message"]
    assert "SHARDLINE_PG_CONNECTION_PAYROLL" in response.json()["message"]


@pytest.mark.timeout(90)
def test_a_lease_tells_readers_where_the_table_is_and_never_the_servers_credentials(
    live_api,
    celery_worker,
    source_database,  # noqa: F811  (the fixture imported above)
):
    with psycopg.connect(source_database, autocommit=True) as connection:
        schema = f"src_{uuid.uuid4().hex[:8]}"
        connection.execute(f"CREATE SCHEMA {schema}")
        connection.execute(f"CREATE TABLE {schema}.t AS SELECT g AS id FROM generate_series(1, 40) AS g")
        connection.execute(f"ALTER TABLE {schema}.t ADD PRIMARY KEY (id)")
    api = live_api("worker")
    body = {"name": f"addr-{uuid.uuid4().hex[:8]}", "works": [f"postgresql://sources?table={schema}.t"]}
    job = api.post("/api/v1/jobs/", {**body, "num_slices": 4, "shuffle": False}).json()
    ready = wait_until(
        lambda: (lambda j: j if j["state"] != "slicing" else None)(api.get(f"/api/v1/jobs/{job['id']}/").json()),
        60,
        0.1,
        "slicing",
    )
    assert ready["state"] == "ready", ready["error"]
    taken = api.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "w", "count": 4}).json()["leases"]
    assert len(taken) == 4
    for lease in taken:
        assert lease["item"].startswith(f"postgresql://sources?table={schema}.t&as_of=")
        address = lease["source"]["connection"]
        assert address["dbname"] == SOURCE_DATABASE
        assert not {"user", "password", "passfile", "sslpassword", "options", "service"} & set(address)
