"""Outside DEBUG, a server without SHARDLINE_DATA_ROOTS reads no file, and says how to allow it.

The attack (issue 25): with no roots (the default), ``/etc/passwd#format=lines``
with ``num_slices`` gave every line's length in the slice offsets, and the
glob ``/root/.*`` listed a directory as items. Now, through a real server and
a real Celery worker that both run without roots:

- a work the server would have to read (with ``num_slices``: a file, a glob,
  a directory; a Delta table) is a 400 that names SHARDLINE_DATA_ROOTS and
  writes nothing;
- a list of files without ``num_slices`` is still a job: the server hands the
  strings to workers and never opens them;
- the slicer refuses too: a job accepted by a server that had roots is
  failed by a worker that has none, before it reads a byte;
- with DEBUG on, the old permissive behaviour stays, with a warning.
"""

import logging
import os
import uuid

import pytest

from server.models import Job, JobState
from server.services import jobs, slicing

from ..conftest import start_celery_worker
from ..support import Api, ServerProcess, wait_until


@pytest.fixture(scope="module")
def without_roots(test_database_url, live_keys):
    """(api without roots, api with every local root) sharing one Celery queue, sliced by a worker without roots."""
    queue = f"shardline-no-roots-{uuid.uuid4().hex[:8]}"
    saved = {name: os.environ.get(name) for name in ("SHARDLINE_CELERY_QUEUE", "SHARDLINE_DATA_ROOTS")}
    os.environ.update(SHARDLINE_CELERY_QUEUE=queue, SHARDLINE_DATA_ROOTS="")
    servers, worker = [], None
    try:
        servers.append(ServerProcess(test_database_url, workers=1).start())
        servers.append(ServerProcess(test_database_url, workers=1, extra_env={"SHARDLINE_DATA_ROOTS": "/"}).start())
        worker = start_celery_worker(test_database_url, "no-roots")
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    yield tuple(Api(server.url, live_keys["worker"]) for server in servers)
    worker.terminate()
    worker.wait(20)
    for server in servers:
        server.stop()


def create(api, works, **fields):
    return api.post("/api/v1/jobs/", {"name": f"read-{uuid.uuid4().hex[:10]}", "works": works, **fields})


@pytest.mark.parametrize(
    "works",
    [
        ["/etc/passwd#format=lines"],
        ["/etc/shadow"],
        ["/root/.*"],
        ["/etc"],
        ["file:///etc/passwd#format=lines"],
        ["delta:///etc"],
    ],
)
def test_a_work_the_server_would_read_is_a_400_saying_how_to_allow_it(without_roots, works):
    api, _with_roots = without_roots
    name = f"read-{uuid.uuid4().hex[:10]}"
    response = api.post("/api/v1/jobs/", {"name": name, "works": works, "num_slices": 4})
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert "the server reads no files" in message and "SHARDLINE_DATA_ROOTS" in message
    listed = api.get("/api/v1/jobs/?page_size=500").json()["results"]
    assert name not in {job["name"] for job in listed}


def test_a_list_of_files_without_num_slices_is_handed_to_workers_unopened(without_roots):
    api, _with_roots = without_roots
    response = create(api, ["/etc/passwd", "/root/.*"])
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["state"] == "ready"
    taken = api.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "w", "count": 2}).json()["leases"]
    assert sorted(lease["item"] for lease in taken) == ["/etc/passwd", "/root/.*"]  # strings, as given


@pytest.mark.timeout(90)
def test_the_slicer_without_roots_fails_a_job_another_server_accepted(without_roots):
    _api, with_roots = without_roots
    response = create(with_roots, ["/etc/passwd#format=lines"], num_slices=4)
    assert response.status_code == 201, response.text
    job = wait_until(
        lambda: (lambda j: j if j["state"] != "slicing" else None)(
            with_roots.get(f"/api/v1/jobs/{response.json()['id']}/").json()
        ),
        60,
        0.1,
        "slicing to end",
    )
    assert job["state"] == "failed" and "the server reads no files" in job["error"]
    assert job["units_count"] == 0


@pytest.mark.django_db
def test_with_debug_on_and_no_roots_the_slicer_reads_any_file_and_warns(settings, tmp_path, caplog):
    settings.DEBUG, settings.SHARDLINE_DATA_ROOTS = True, []
    path = tmp_path / "a.csv"
    path.write_text("".join(f"{i}\n" for i in range(10)))
    job, _ = jobs.create_or_attach(
        jobs.JobSpec(name="debug", works=[str(path)], num_slices=2, lease_timeout=60.0, max_attempts=3)
    )
    with caplog.at_level(logging.WARNING, logger="shardline.slicing"):
        slicing.slice_job(job.pk)
    assert Job.objects.get(pk=job.pk).state == JobState.READY
    assert any("no SHARDLINE_DATA_ROOTS" in record.getMessage() for record in caplog.records)
