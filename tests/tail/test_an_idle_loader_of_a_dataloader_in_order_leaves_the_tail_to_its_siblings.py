"""A plain DataLoader asks its loaders for batches in turn: one with nothing to read leaves while a sibling reads.

At the tail of a job, a loader that found nothing to lease waited on the
server for what other workers held, and the DataLoader waited for that
loader's next batch while its sibling held records it could deliver: the
training loop stalled until the other workers were done. Now the idle
loader leaves the pass; the DataLoader goes on with the loader that reads,
and that last loader waits for the end. (A loader that has read nothing
in its pass waits, as before: a split may give it a range of its own.)

The job: three ranges of one file. The test holds the first (another
worker, reading for seconds), and a plain ``DataLoader(num_workers=2)``
reads the other two: a long one and a short one, one loader each.
"""

from collections import Counter
from pathlib import Path

import pytest

from tests.support import wait_until
from worker_sdk.protocol import TakeRequest
from worker_sdk.queue import WorkQueue

from .harness import Lines, start_reader, write_files

pytestmark = pytest.mark.timeout(150)

# The short range outlasts a loader's prefetch (2 batches): its loader cannot
# finish it before the other loader has leased the long one.
HELD, LONG, SHORT = 10, 60, 6


def test_the_loop_reads_its_siblings_records_while_another_worker_holds_the_last_lease(sdk_env, tmp_path):
    path = write_files(tmp_path, 1, HELD + LONG + SHORT)[0]
    edges = [0, HELD, HELD + LONG, HELD + LONG + SHORT]
    works = [f"{path}?start={a}&end={b}" for a, b in zip(edges, edges[1:])]
    queue = WorkQueue(works, shuffle=False, name="in-order-tail", run=sdk_env["SHARDLINE_RUN"], lease_timeout=120)
    job_id = queue.job["id"]
    held = queue._client.take(job_id, TakeRequest("another-worker")).leases
    assert [lease.item for lease in held] == works[:1]

    barrier = tmp_path / "barrier"
    barrier.mkdir()
    reader = Lines(start_reader(sdk_env, "torch", queue.name, 0, 0.0, "in-order", works, barrier, 1))
    # Every record of the two ranges reaches the loop while the first is held.
    wait_until(lambda: len(reader.read) >= LONG + SHORT, 60, 0.1, "the loop to receive both of its ranges")
    assert reader.child.poll() is None and not reader.finished  # the last loader waits for the held range

    queue._client.complete(held[0].id, held[0].token)
    assert reader.ended_well(60) and reader.finished
    lines = Path(path).read_text().splitlines()
    assert Counter(reader.read) == Counter(lines[HELD:])  # every record of its ranges once, none of the held one
    assert queue._client.job(job_id)["state"] == "done"
