"""The two WorkQueue examples of DeepRec's documentation, run as scripts (examples/)."""

import pytest

from .conftest import run_python

pytestmark = pytest.mark.tf


def expected_lines(files):
    return sorted(line for path in files for line in open(path).read().splitlines())


def test_the_tf_data_example_reads_every_line_once(sdk_env, csv_files, live_api):
    result = run_python(["examples/seed_dataset.py", *csv_files], sdk_env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(result.stdout.splitlines()) == expected_lines(csv_files)


def test_the_text_line_reader_example_reads_every_line_once(sdk_env, csv_files, live_api):
    files = csv_files[:3]
    result = run_python(["examples/seed_reader.py", *files], sdk_env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(result.stdout.splitlines()) == expected_lines(files)
    # The last items were completed when the process exited normally.
    jobs = live_api("viewer").get("/api/v1/jobs/?page_size=500").json()["results"]
    job = next(j for j in jobs if j["name"] == f"work_queue.{sdk_env['SHARDLINE_RUN']}")
    marks = live_api("viewer").get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    assert (marks["done"], marks["leased"], marks["pending"]) == (3, 0, 0)


def test_the_small_model_trains_from_leased_csv_files(sdk_env, csv_files):
    result = run_python(["examples/train_csv.py", *csv_files], sdk_env, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "8/8 items done, state done" in result.stdout
