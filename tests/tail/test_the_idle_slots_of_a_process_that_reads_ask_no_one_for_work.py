"""dataset()'s slots whose siblings still read ask no one for work: splits come only from a process that ran dry.

Two processes of equal pace read a job of two slices with
``dataset(cycle_length=2)``. Each process trains on one slice at its own
pace however many slots it has; a slot of it that finds nothing pending is
not an idle worker. Such slots asked for splits all the same, and the two
processes cut each other's slices again and again to the end of the job
(bench/RESULTS.md: 54-90 splits in a 6-s job of eight processes). Now the
end of the job may cut a few records off whichever finishes last, and
nothing more; every record is still read exactly once.
"""

import uuid

import pytest

from server.models import Event, EventKind, Item

from .harness import read_together

pytestmark = [pytest.mark.tf, pytest.mark.timeout(180)]

SLICES = 2
LINES = 600  # per file: one slice each, about 3 s of reading at 5 ms a record


def test_the_idle_slots_of_a_process_that_reads_ask_no_one_for_work(sdk_env, celery_worker, tmp_path):
    name = f"busy-slots-{uuid.uuid4().hex[:6]}"
    job, _ = read_together(
        sdk_env, tmp_path, "dataset", name, SLICES, LINES, [("even-0", 0.005, 0.0), ("even-1", 0.005, 0.0)]
    )
    # Each split was asked for by a process that held nothing unfinished: its
    # remainder event (the asker's name, the time of the cut) falls outside
    # every item that process read. Before, the second slot of each process
    # asked at once, while the first read its slice (2 to 6 splits a run).
    holding = [
        (remainder.worker, remainder.at, item.id)
        for remainder in Event.objects.filter(job_id=job["id"], kind=EventKind.REMAINDER)
        for item in Item.objects.filter(job_id=job["id"], worker=remainder.worker)
        # Not the remainder itself: its taker's lease may carry the time its
        # transaction began, before the cut's event.
        if item.id != remainder.item_id
        and item.leased_at < remainder.at
        and (item.completed_at is None or item.completed_at > remainder.at)
    ]
    assert holding == [], f"splits asked for by a process still reading (asker, when, the item it read): {holding}"
    # At the end, the first process to finish may take the rest of the other's
    # slice, and that one the last records of its remainder: two at most.
    assert job["splits"] <= 2, f"{job['splits']} splits between two processes that both read all along"
