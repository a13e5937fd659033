"""The job page says what its workers are told: works handed out whole, and slicing that takes long (issue 28)."""

from datetime import timedelta
from unittest import mock

from django.test import override_settings
from django.utils import timezone

from server.models import Job
from server.services import jobs, slicing


@override_settings(SHARDLINE_DATA_ROOTS=["hdfs://prj/"])
def test_works_handed_out_whole_are_a_warning_on_the_job_page(browser_for):
    job, _ = jobs.create_or_attach(jobs.JobSpec(name="whole-page", works=["hdfs://prj/t/a"], num_slices=3))
    slicing.slice_job(job.id)
    page = browser_for("viewer").get(f"/jobs/{job.id}/").content.decode()
    assert 'class="warning"' in page and "1 works handed out whole, not sliced" in page
    assert "hdfs://prj/t/a: the server cannot open hdfs://" in page


def test_a_job_slicing_for_over_a_minute_says_what_to_check(browser_for, tmp_path):
    job, _ = jobs.create_or_attach(jobs.JobSpec(name="slow-page", works=[str(tmp_path / "a.csv")], num_slices=2))
    viewer = browser_for("viewer")
    assert "has been slicing for" not in viewer.get(f"/jobs/{job.id}/").content.decode()
    later = Job.objects.get(pk=job.id).created_at + timedelta(seconds=90)
    with mock.patch.object(timezone, "now", return_value=later):
        page = viewer.get(f"/jobs/{job.id}/").content.decode()
    assert "Job &#x27;slow-page&#x27; has been slicing for 90 s" in page and "Celery worker" in page
