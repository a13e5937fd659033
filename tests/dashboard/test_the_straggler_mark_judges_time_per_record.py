"""The job page's Workers table: records done, time per record, and a straggler mark judged per record.

Split pieces differ in size: a worker that finished one 3-record piece has
a short mean item time, however slow it reads. The mark, as the server's
straggler rule (server/sql/take.sql), compares seconds per record.
"""

import re

import pytest

from server.models import Worker
from tests.api.helpers import create_job, take

pytestmark = pytest.mark.django_db


def test_a_slow_worker_of_small_pieces_is_marked_and_fast_readers_of_long_ranges_are_not(
    browser_for, worker_client, job_name
):
    job = create_job(worker_client, job_name, [f"/d/{i}.csv?start=0&end=150" for i in range(4)])
    for name in ("fast-1", "fast-2", "fast-3", "slow"):
        take(worker_client, job["id"], name)
    # As a run leaves them (in a test transaction, now() does not move).
    Worker.objects.filter(job_id=job["id"], name__startswith="fast").update(
        items_done=1, records_done=150, busy_seconds=5.0
    )
    Worker.objects.filter(job_id=job["id"], name="slow").update(items_done=1, records_done=3, busy_seconds=0.6)
    html = browser_for("viewer").get(f"/jobs/{job['id']}/live/").content.decode()
    section = html[html.index("<h2>Workers") :]
    section = section[: section.index("</table>")]
    rows = dict(re.findall(r"<tr[^>]*>\s*<td>([\w-]+)(.*?)</tr>", section, re.S))
    assert ">straggler</span>" in rows["slow"]
    assert all(">straggler</span>" not in rows[name] for name in ("fast-1", "fast-2", "fast-3"))
    # Its mean item time (0.60 s) is the shortest; its time per record (0.2 s) the longest.
    assert "0.60s" in rows["slow"] and "0.2000s" in rows["slow"] and ">3</td>" in rows["slow"]
    assert "5.00s" in rows["fast-1"] and "0.0333s" in rows["fast-1"] and ">150</td>" in rows["fast-1"]


def test_the_api_says_each_workers_records_and_pace(viewer_client, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/d/a.csv?start=0&end=40", "/d/whole.bin"], shuffle=False)
    leases = take(worker_client, job["id"], "w", count=2)["leases"]
    take(worker_client, job["id"], "w", complete=[{"id": x["id"], "token": x["token"]} for x in leases])
    (worker,) = viewer_client.get(f"/api/v1/workers/?job={job['id']}").json()["results"]
    assert (worker["items_done"], worker["records_done"]) == (2, 41)
    assert worker["record_seconds"] == pytest.approx(worker["busy_seconds"] / 41)
