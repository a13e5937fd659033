"""SHARDLINE_DATA_ROOTS: the slicer reads nothing outside the allowed roots.

Proves:
- job creation with num_slices refuses, with a 400 naming the work and
  writing nothing, works that lead outside the roots: `..` segments, a
  prefix that climbs out, a symlink inside a root that points outside, a
  URL outside the allowed URL prefix (including `..` and a look-alike
  bucket prefix);
- works inside the roots (a local root and an s3:// prefix) are accepted;
- the slicer itself (the Celery task's service function) fails a job whose
  works lead outside (a symlink found when a directory is expanded, one
  created after the job was accepted), with a message naming the work;
- with the setting unset, a work the server would read is refused outside
  DEBUG and allowed with DEBUG (the documented default; the attacks on it,
  through a real server and Celery worker, are in
  test_without_data_roots_the_server_reads_no_file.py).
"""

import os

import pytest

from server.models import Job, JobState, Unit
from server.services import jobs, slicing

pytestmark = pytest.mark.django_db


@pytest.fixture
def tree(tmp_path, settings):
    data, outside = tmp_path / "data", tmp_path / "outside"
    data.mkdir()
    outside.mkdir()
    (outside / "secret.csv").write_text("s,e,c\n" * 4)
    (data / "a.csv").write_text("".join(f"{i},x\n" for i in range(20)))
    os.symlink(outside / "secret.csv", data / "link.csv")
    settings.SHARDLINE_DATA_ROOTS = [str(data), "s3://bucket/train/"]
    return data, outside


def post(client, works, prefix=None, name="roots"):
    body = {"name": name, "works": works, "num_slices": 4, "prefix": prefix}
    return client.post("/api/v1/jobs/", body, format="json")


@pytest.mark.parametrize(
    "works, prefix",
    [
        (["{data}/../outside/secret.csv"], None),
        (["{data}/sub/../../outside/secret.csv"], None),
        (["../outside/secret.csv"], "{data}/"),
        (["{data}/link.csv"], None),
        (["/etc/passwd"], None),
        (["file://{data}/../outside/secret.csv"], None),
        (["s3://bucket/train/../private/x.parquet"], None),
        (["s3://bucket/trainee/x.parquet"], None),
        (["s3://other/train/x.parquet"], None),
        (["{data}/a.csv", "{outside}/secret.csv"], None),
    ],
)
def test_creation_refuses_works_outside_the_roots(worker_client, tree, works, prefix):
    data, outside = tree
    works = [w.format(data=data, outside=outside) for w in works]
    prefix = prefix.format(data=data) if prefix else None
    response = post(worker_client, works, prefix)
    assert response.status_code == 400, response.content
    body = response.json()
    assert "works" in body["fields"] and "outside the allowed data roots" in body["message"]
    assert Job.objects.count() == 0 and Unit.objects.count() == 0


def test_works_inside_the_roots_are_accepted(worker_client, tree):
    data, _ = tree
    response = post(worker_client, [f"{data}/a.csv", f"{data}/sub/../a.csv", "s3://bucket/train/part-0.parquet"])
    assert response.status_code == 201, response.content


def test_without_num_slices_works_are_only_strings_and_are_not_checked(worker_client, tree):
    # The server never opens them: the workers read them with their own permissions.
    response = worker_client.post("/api/v1/jobs/", {"name": "plain", "works": ["/etc/passwd"]}, format="json")
    assert response.status_code == 201


def test_unset_roots_allow_nothing_outside_debug_and_everything_with_it(worker_client, tree, settings):
    settings.SHARDLINE_DATA_ROOTS, settings.DEBUG = [], False
    _data, outside = tree
    refused = post(worker_client, [f"{outside}/secret.csv"])
    assert refused.status_code == 400 and "the server reads no files" in refused.json()["message"]
    settings.DEBUG = True
    assert post(worker_client, [f"{outside}/secret.csv"]).status_code == 201


def sliced(tree, works, settings, name):
    # Accepted while unchecked (as by an older server, or before a link was
    # planted: the service creates without the API's check), then sliced
    # under the policy.
    job, _ = jobs.create_or_attach(
        jobs.JobSpec(name=name, works=works, num_slices=4, lease_timeout=60.0, max_attempts=3)
    )
    slicing.slice_job(job.pk)
    return Job.objects.get(pk=job.pk)


def test_the_slicer_fails_a_job_whose_directory_holds_a_link_outside(tree, settings):
    data, _ = tree
    job = sliced(tree, [str(data)], settings, "dir-with-link")
    assert job.state == JobState.FAILED
    assert "link.csv" in job.error and "outside the allowed data roots" in job.error


def test_the_slicer_fails_a_job_naming_a_path_that_climbs_out(tree, settings):
    data, _ = tree
    job = sliced(tree, [f"{data}/../outside/secret.csv"], settings, "climbs-out")
    assert job.state == JobState.FAILED and "outside the allowed data roots" in job.error


def test_the_slicer_slices_works_inside_the_roots(tree, settings):
    data, _ = tree
    job = sliced(tree, [f"{data}/a.csv"], settings, "inside")
    assert job.state == JobState.READY, job.error
    assert job.units_count == 4
