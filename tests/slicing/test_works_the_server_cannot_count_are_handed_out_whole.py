"""Works the server cannot open or count never hang a job (issue 28).

Found: DeepRec's test_slices (``hdfs://...`` works, ``num_slices=5``) hung for
good: fsspec raised ``OSError: Unable to load libjvm`` in the slicer, the
Celery task died, the job stayed ``slicing`` and every take waited. DeepRec
hands a work whose records it cannot count out whole; so does Shardline, with
a warning on the job. Any other error while slicing fails the job, naming
the work and the cause; a take that has waited a minute for slicing says so.
"""

from datetime import timedelta
from unittest import mock

import pytest
from django.test import override_settings
from django.utils import timezone

from server import sources
from server.models import Job
from server.services import jobs, slicing

from .data import write_csv


@pytest.mark.django_db
def test_a_work_of_a_scheme_without_a_filesystem_is_handed_out_whole_with_a_warning(worker_client, tmp_path):
    csv = write_csv(tmp_path / "good.csv", 12)
    body = {"name": "no-fs", "works": ["nosuchfs://bucket/part-0", str(csv)], "num_slices": 4, "shuffle": False}
    with override_settings(SHARDLINE_DATA_ROOTS=[str(tmp_path)]):
        # The admin's policy comes first, whatever the server has installed.
        refused = worker_client.post("/api/v1/jobs/", body, format="json")
        assert refused.status_code == 400 and "outside the allowed data roots" in refused.json()["message"]
    with override_settings(SHARDLINE_DATA_ROOTS=[str(tmp_path), "nosuchfs://bucket/"]):
        created = worker_client.post("/api/v1/jobs/", body, format="json")
        assert created.status_code == 201, created.content
        slicing.slice_job(created.json()["id"])
    job = worker_client.get(f"/api/v1/jobs/{created.json()['id']}/").json()
    assert job["state"] == "ready", job["error"]
    items = list(Job.objects.get(pk=job["id"]).unit_set.order_by("idx").values_list("item", flat=True))
    assert items[0] == "nosuchfs://bucket/part-0"
    assert len(items) == 4 and all(item.startswith(f"{csv}?start=") for item in items[1:])
    [warning] = job["warnings"]
    assert "1 works handed out whole" in warning and "nosuchfs://bucket/part-0" in warning
    assert "no filesystem for nosuchfs://" in warning


@pytest.mark.django_db
@override_settings(SHARDLINE_DATA_ROOTS=["hdfs://prj/", "hdfs://path/"])
def test_hdfs_works_without_a_jvm_are_handed_out_whole_in_their_order():
    # The admin allows the server to read these HDFS paths, but this server
    # has no JVM: fsspec's HadoopFileSystem cannot start, as in DeepRec's test.
    works = ["hdfs://path/to/my/file", "hdfs://prj/tables/tbl1", "hdfs://prj/tables/tbl1/pt=12"]
    job, _ = jobs.create_or_attach(jobs.JobSpec(name="hdfs-whole", works=works, shuffle=False, num_slices=5))
    assert job.state == "slicing"
    slicing.slice_job(job.id)
    job.refresh_from_db()
    assert job.state == "ready" and job.units_count == 3
    assert list(job.unit_set.order_by("idx").values_list("item", flat=True)) == works
    [warning] = job.warnings
    assert "3 works handed out whole" in warning and "the server cannot open hdfs://" in warning


@pytest.mark.django_db
def test_an_unexpected_error_while_counting_fails_the_job_naming_the_work(tmp_path):
    csv = write_csv(tmp_path / "data.csv", 5)
    job, _ = jobs.create_or_attach(jobs.JobSpec(name="count-raises", works=[str(csv)], num_slices=2))
    with mock.patch.object(sources, "count", side_effect=RuntimeError("the reader broke")):
        outcome = slicing.slice_job(job.id)
    job.refresh_from_db()
    assert job.state == "failed" and "failed" in outcome
    assert job.error == f"{csv}: RuntimeError: the reader broke"


@pytest.mark.django_db
def test_a_take_that_waited_a_minute_for_slicing_says_so(worker_client, tmp_path):
    job, _ = jobs.create_or_attach(jobs.JobSpec(name="slow-slicing", works=[str(tmp_path / "a.csv")], num_slices=2))
    take = f"/api/v1/jobs/{job.id}/leases/"
    answer = worker_client.post(take, {"worker": "w"}, format="json").json()
    assert answer["leases"] == [] and answer["slicing"] is None and answer["retry_after"] > 0

    later = Job.objects.get(pk=job.id).created_at + timedelta(seconds=61)
    with mock.patch.object(timezone, "now", return_value=later):
        answer = worker_client.post(take, {"worker": "w"}, format="json").json()
    assert answer["leases"] == [] and answer["slicing"].startswith("job 'slow-slicing' has been slicing for 61 s")
    assert "0 of 1 works inspected" in answer["slicing"] and "Celery worker" in answer["slicing"]
