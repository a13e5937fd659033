"""LocalWorkMgr (DeepRec's inference-job restart), better with a server behind it (issue 28).

A worker records each work it takes in its local folder, as DeepRec does. Its
restart (same job_name and task_index) reads first the works found only in
that folder, then gets back at once, fenced, the leases its dead predecessor
still held (no wait for their 60-s expiry, no other worker reading them),
then reads on. Nothing is read twice by two workers; what the dead process
had finished is not read again.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from server.models import Event, EventKind, Item, Job

pytestmark = pytest.mark.tf

WORKS = [f"/w/{i}?start=0&end=4" for i in range(6)]


def test_a_restart_reads_local_works_then_its_own_held_leases_then_the_rest(graph_worker, sdk_env, tmp_path, live_api):
    first = graph_worker("local-work", "--dir", str(tmp_path), "--die-after", "2", *WORKS, check=False)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.items == WORKS[:2] and "dying" in first.stdout
    folder = tmp_path / "worker_0"
    recorded = sorted(open(folder / name).read() for name in os.listdir(folder))
    assert set(WORKS[:2]) <= set(recorded)
    # What it died holding, as the server has it: the item it was reading, or
    # the next one when its dataset had already asked for it (that take
    # completed the item before; the process may die before recording it).
    job_id = Job.objects.get(name=f"deeprec_queue.{sdk_env['SHARDLINE_RUN']}").id
    rows = live_api("viewer").get(f"/api/v1/jobs/{job_id}/items/", params={"state": "leased"}).json()["results"]
    held = sorted(row["item"] for row in rows)
    assert held and set(held) <= set(WORKS[1:3]), held

    # A work that is no item of the job, left in the folder (DeepRec's test writes one by hand).
    (folder / "start_0_end_4").write_text("/extra?start=0&end=4")
    # The restart and another worker read at once: the held leases can only go to the restart.
    with ThreadPoolExecutor(2) as pool:
        restart = pool.submit(graph_worker, "local-work", "--dir", str(tmp_path), *WORKS)
        other = pool.submit(graph_worker, "local-work", "--dir", str(tmp_path), "--task", "1", *WORKS).result()
        again = restart.result()

    assert again.items[0] == "/extra?start=0&end=4"
    # The held ones come back to the restart, never to worker 1.
    assert again.items[1 : 1 + len(held)] == held
    assert not set(held) & set(other.items)
    # Read once each: what the first process finished, then the restart's and worker 1's.
    read = [item for item in first.items if item not in held] + again.items[1:] + other.items
    assert sorted(read) == sorted(WORKS)

    items = Item.objects.filter(job_id=job_id)
    assert sorted(items.values_list("state", flat=True)) == ["done"] * 6
    resumed = Event.objects.filter(job_id=job_id, kind=EventKind.RESUMED)
    assert resumed.count() == len(held)
    assert set(resumed.values_list("worker", flat=True)) == {"worker:0"}
