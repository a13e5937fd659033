"""The lease statements run as prepared statements of the session (server/sql/__init__.py)."""

import pytest
from django.db import connection
from django.test import override_settings

from .helpers import create_job, take


def prepared_take_statements():
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE name = 'shardline_take'")
        return cursor.fetchone()[0]


def forget_prepared_statements():
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    connection.connection.__dict__.pop("shardline_prepared", None)


@pytest.mark.django_db
def test_a_take_is_prepared_once_per_connection_and_reused(worker_client, job_name):
    forget_prepared_statements()
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(6)])
    lease = take(worker_client, job["id"])["leases"][0]
    assert prepared_take_statements() == 1
    for _ in range(4):
        lease = take(worker_client, job["id"], complete=[{"id": lease["id"], "token": lease["token"]}])["leases"][0]
    assert prepared_take_statements() == 1
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()["done"] == 4


@pytest.mark.django_db
@override_settings(SHARDLINE_PREPARED_STATEMENTS=False)
def test_with_prepared_statements_off_takes_work_and_prepare_nothing(worker_client, job_name):
    forget_prepared_statements()
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(3)])
    lease = take(worker_client, job["id"])["leases"][0]
    result = take(worker_client, job["id"], complete=[{"id": lease["id"], "token": lease["token"]}])
    assert result["completed"] == [lease["id"]] and len(result["leases"]) == 1
    assert prepared_take_statements() == 0


@pytest.mark.django_db(transaction=True)
def test_a_statement_dropped_from_the_session_is_prepared_again(worker_client, job_name):
    # What a pooler's DISCARD ALL does between clients: the server forgets,
    # the process still believes the statement is there.
    job = create_job(worker_client, job_name, [f"/d/{i}" for i in range(3)])
    lease = take(worker_client, job["id"])["leases"][0]
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    result = take(worker_client, job["id"], complete=[{"id": lease["id"], "token": lease["token"]}])
    assert result["completed"] == [lease["id"]] and len(result["leases"]) == 1
    assert prepared_take_statements() == 1
