"""WorkQueueLoader's loader processes take in turn: one reads while it keeps the loop fed, a second only for a starved loop.

Each loader of a DataLoader leased as an idle worker does: a process of two
loaders leased two slices at the start, read both at its pace, and its idle
loader asked for splits while its sibling kept the loop fed (a slow worker
read 300 records of 1,200 with split off, bench/RESULTS.md). Now a loader
takes while a sibling reads only once the training loop has waited for data
(worker_sdk.turns); every record is still read exactly once.
"""

import datetime
import uuid

import pytest

from server.models import Event, EventKind, Item

from .harness import read_together

pytestmark = pytest.mark.timeout(180)

SLICES = 2
LINES = 600  # per file: one slice each, about 3 s of training at 5 ms a record


def consumer(worker: str) -> str:
    return worker.split(":loader")[0]


def leased(job: dict) -> list[Item]:
    return list(Item.objects.filter(job_id=job["id"]).exclude(leased_at=None))


# A range's last batches may still be on their way to the loop when its
# loader takes the next item: the range is acknowledged once the loop has
# received them (worker_sdk.receipts), a few records later (2 loaders x 2
# batches of one 5-ms record here). Two loaders reading at once hold two
# items for seconds.
ON_THE_WAY = datetime.timedelta(seconds=0.5)


def held_at(items: list[Item], at) -> list[Item]:
    return [
        item
        for item in items
        if item.leased_at < at and (item.completed_at is None or item.completed_at > at + ON_THE_WAY)
    ]


def test_a_loader_whose_sibling_keeps_the_loop_fed_takes_nothing(sdk_env, celery_worker, tmp_path):
    name = f"loader-turns-{uuid.uuid4().hex[:6]}"
    job = read_together(sdk_env, tmp_path, "loader", name, SLICES, LINES, [("p0", 0.005, 0.0), ("p1", 0.005, 0.0)])
    items = leased(job)
    # Each process trained on one slice at a time: no item was leased for a
    # consumer while another of its items was unfinished. Before, both
    # loaders of a process leased at the start.
    overlapping = [
        (item.worker, other.worker)
        for item in items
        for other in held_at(items, item.leased_at)
        if other.id != item.id and consumer(other.worker) == consumer(item.worker)
    ]
    assert overlapping == [], f"a process held two items at once (its loaders): {overlapping}"
    # Splits were asked for by processes that held nothing unfinished.
    asked_while_holding = [
        (remainder.worker, remainder.at, item.worker, item.leased_at, item.completed_at)
        for remainder in Event.objects.filter(job_id=job["id"], kind=EventKind.REMAINDER)
        for item in held_at(items, remainder.at)
        # Not the remainder itself: its taker's lease may carry the time its
        # transaction began, before the cut's event.
        if item.id != remainder.item_id and consumer(item.worker) == consumer(remainder.worker)
    ]
    assert asked_while_holding == [], (
        f"splits asked for by a process still reading (asker, when, the item it held: its loader, leased, completed): "
        f"{asked_while_holding}; events: {list(Event.objects.filter(job_id=job['id']).values_list('kind', 'worker', 'at', 'item_id', 'message'))}"
    )
    assert job["splits"] <= 2, f"{job['splits']} splits between two processes that both read all along"


def test_a_loop_that_waits_for_its_reader_gets_a_second_loader(sdk_env, celery_worker, tmp_path):
    # One process whose reader takes 5 ms a record and whose loop takes
    # nothing: the loop waits for data, so its second loader takes the other
    # slice while the first still reads.
    name = f"loader-starved-{uuid.uuid4().hex[:6]}"
    job = read_together(sdk_env, tmp_path, "loader", name, SLICES, LINES, [("p0", 0.0, 0.005)])
    items = leased(job)
    originals = sorted((item for item in items if item.parent_id is None), key=lambda item: item.leased_at)
    assert len(originals) == SLICES
    first, second = originals
    assert first.worker != second.worker, "one loader read both slices"
    assert second.leased_at < first.completed_at, (
        f"the second slice was leased at {second.leased_at}, once the first was done ({first.completed_at})"
    )
