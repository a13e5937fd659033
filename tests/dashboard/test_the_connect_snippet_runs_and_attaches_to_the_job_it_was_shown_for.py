"""The job page's "Connect a training script" snippet is Python that attaches to that very job.

Found: for a sliced job, or one of more than 10 works (the sample job), the
works line put its comma inside a comment (a SyntaxError) and the works were
shown nowhere; ``run=""`` silently overrode SHARDLINE_RUN.
"""

import html
import os
import re
import subprocess
import sys
import uuid

import pytest
from django.test import Client

from server.services import accounts, slicing
from tests.support import ROOT


@pytest.fixture
def viewer(django_db_blocker, live_server_url):
    """A logged-in dashboard client over the database the live server uses (committed, as the server sees it)."""
    with django_db_blocker.unblock():
        user, _ = accounts.ensure_user(f"viewer-{uuid.uuid4().hex[:6]}", "viewer")
        client = Client()
        client.force_login(user)

    def get(path):
        with django_db_blocker.unblock():
            return client.get(path)

    return get


@pytest.fixture
def make_job(live_api):
    def make(works, **fields):
        body = {"name": f"snippet-{uuid.uuid4().hex[:8]}", "works": works, **fields}
        response = live_api("worker").post("/api/v1/jobs/", body)
        assert response.status_code == 201, response.text
        return response.json()

    return make


def snippet_of(viewer, job_id):
    page = viewer(f"/jobs/{job_id}/").content.decode()
    blocks = [html.unescape(block) for block in re.findall(r"<pre><code>(.*?)</code></pre>", page, re.S)]
    env, code = blocks
    return env, code, page


def run_snippet(code, live_server_url, live_keys, cwd):
    """The snippet in a fresh interpreter as a worker runs it (SHARDLINE_RUN unset): the id of the job it attached to."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SHARDLINE_")}
    env.update(SHARDLINE_URL=live_server_url, SHARDLINE_TOKEN=live_keys["worker"], PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-c", code + "\nprint(work_queue.job['id'])"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return int(result.stdout.split()[-1])


def test_a_job_of_few_works_lists_them_and_the_snippet_attaches_to_it(
    viewer, make_job, live_server_url, live_keys, tmp_path
):
    job = make_job(["/data/a.csv", "/data/b.csv", "/data/c.csv"], shuffle=False, seed=3)
    env, code, _page = snippet_of(viewer, job["id"])
    compile(code, "snippet", "exec")
    assert "['/data/a.csv', '/data/b.csv', '/data/c.csv']," in code and "run=" not in code
    assert "unset SHARDLINE_RUN" in env
    assert run_snippet(code, live_server_url, live_keys, tmp_path) == job["id"]


def test_a_job_of_many_works_with_a_prefix_reads_them_from_the_pages_works_json(
    viewer, make_job, live_server_url, live_keys, tmp_path
):
    works = [f"part-{i:03d}.csv" for i in range(12)]
    job = make_job(works, prefix="/data/", num_epochs=2)
    _env, code, page = snippet_of(viewer, job["id"])
    compile(code, "snippet", "exec")
    assert "prefix='/data/'" in code and "json.load(file)" in code
    assert f'href="http://testserver/jobs/{job["id"]}/works.json" download' in page
    download = viewer(f"/jobs/{job['id']}/works.json")
    assert download.json() == works  # without the prefix, which the snippet passes on its own
    (tmp_path / "works.json").write_bytes(download.content)
    assert run_snippet(code, live_server_url, live_keys, tmp_path) == job["id"]


def test_a_job_named_with_a_run_passes_that_run(viewer, make_job, live_server_url, live_keys, tmp_path):
    queue = f"queue-{uuid.uuid4().hex[:6]}"
    job = make_job(["/x", "/y"], name=queue, run="run-7")
    assert job["name"] == f"{queue}.run-7"
    env, code, _page = snippet_of(viewer, job["id"])
    assert f"name={queue!r},\n    run='run-7'," in code and "SHARDLINE_RUN" not in env
    assert run_snippet(code, live_server_url, live_keys, tmp_path) == job["id"]


def test_a_sliced_job_folds_its_slices_back_into_its_works(
    viewer, make_job, live_server_url, live_keys, tmp_path, django_db_blocker
):
    files = []
    for i in range(3):
        path = tmp_path / f"part-{i}.csv"
        path.write_text("".join(f"{i},{j}\n" for j in range(40)))
        files.append(str(path))
    job = make_job(files, num_slices=7)
    with django_db_blocker.unblock():
        slicing.slice_job(job["id"])  # what the Celery task does
    _env, code, _page = snippet_of(viewer, job["id"])
    compile(code, "snippet", "exec")
    assert repr(files) + "," in code and "num_slices=7" in code
    assert run_snippet(code, live_server_url, live_keys, tmp_path) == job["id"]


def test_a_job_whose_works_cannot_be_told_says_what_to_pass_in_python_that_compiles(
    viewer, make_job, tmp_path, django_db_blocker
):
    folder = tmp_path / "folder"
    folder.mkdir()
    for i in range(2):
        (folder / f"part-{i}.csv").write_text("".join(f"{i},{j}\n" for j in range(20)))
    job = make_job([str(folder)], num_slices=4)
    with django_db_blocker.unblock():
        slicing.slice_job(job["id"])  # the folder became two files' slices: the server keeps only the digest
    _env, code, page = snippet_of(viewer, job["id"])
    compile(code, "snippet", "exec")
    assert "as a JSON list in works.json" in code and "409" in code and "Download works.json" not in page
    assert viewer(f"/jobs/{job['id']}/works.json").status_code == 404
