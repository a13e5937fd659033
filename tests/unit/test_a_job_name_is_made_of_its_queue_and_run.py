"""The SDK sends a job's queue and run apart; the server names the job ``queue.run`` (at most 200 characters)."""

import pytest

from worker_sdk.names import job_name_for, job_parts


@pytest.mark.parametrize(
    "name, run, parts",
    [
        ("ctr", None, ("ctr", "")),
        ("ctr", "", ("ctr", "")),
        ("ctr.v2", "7", ("ctr.v2", "7")),
        ("my queue!", "run 1", ("my-queue", "run-1")),
        ("///", None, ("work_queue", "")),
        ("q" * 250, None, ("q" * 200, "")),
        ("q" * 250, "r" * 150, ("q" * 99, "r" * 100)),
    ],
)
def test_parts_are_the_servers_characters_and_fit_its_name(name, run, parts):
    assert job_parts(name, run) == parts
    queue, run_part = parts
    full = job_name_for(name, run)
    assert full == (f"{queue}.{run_part}" if run_part else queue)
    assert len(full) <= 200
