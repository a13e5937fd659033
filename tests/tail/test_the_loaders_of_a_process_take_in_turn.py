"""WorkQueueLoader's loader processes take in turn: one reads while it keeps the loop fed, a second only for a starved loop.

Each loader of a DataLoader leased as an idle worker does: a process of two
loaders leased two slices at the start, read both at its pace, and its idle
loader asked for splits while its sibling kept the loop fed (a slow worker
read 300 records of 1,200 with split off, bench/RESULTS.md). Now a loader
takes while a sibling reads only once the training loop has waited for data
(worker_sdk.turns); every record is still read exactly once.
"""

import datetime
import re
import uuid

import pytest

from server.models import Event, EventKind, Item
from worker_sdk import turns

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


def starved_asks(stderr: str) -> list[int | None]:
    """What a process's loaders took while a sibling read (a lease, or None), as worker_sdk.turns says (reader.py logs it)."""
    return [
        int(lease) if lease else None
        for lease in re.findall(r"asked for work while a sibling reads.*: (?:took lease (\d+)|none came)", stderr)
    ]


def loop_starved(stdout: str) -> float:
    """The seconds the process's loop waited for data, by its own clock (reader.py)."""
    (seconds,) = re.findall(r"^loop starved (\S+)$", stdout, re.M)
    return float(seconds)


def test_a_loader_whose_sibling_keeps_the_loop_fed_takes_nothing(sdk_env, celery_worker, tmp_path):
    name = f"loader-turns-{uuid.uuid4().hex[:6]}"
    job, outputs = read_together(
        sdk_env, tmp_path, "loader", name, SLICES, LINES, [("p0", 0.005, 0.0), ("p1", 0.005, 0.0)]
    )
    items = leased(job)
    # A loader takes while its sibling reads only for a loop that starved
    # (a busy machine can starve even this one): then the process says so,
    # and its loop's own clock agrees it waited that long.
    asks = {worker: starved_asks(stderr) for worker, (_, stderr) in outputs.items()}
    starved = {worker: {lease for lease in leases if lease is not None} for worker, leases in asks.items()}
    for worker, leases in asks.items():
        waited = loop_starved(outputs[worker][0])
        assert waited >= len(leases) * turns.STARVED_SECONDS, (
            f"{worker}'s loaders asked for work {len(leases)} times while a sibling read ({leases}), "
            f"its loop starved only {waited:.3f} s"
        )
    # Each process trained on one slice at a time otherwise: no item was
    # leased for a consumer while another of its items was unfinished.
    # Before, both loaders of a process leased at the start.
    overlapping = [
        (item.id, item.worker, other.worker)
        for item in items
        for other in held_at(items, item.leased_at)
        if other.id != item.id
        and consumer(other.worker) == consumer(item.worker)
        and item.id not in starved[consumer(item.worker)]
    ]
    assert overlapping == [], f"a process held two items at once (its loaders) with its loop fed: {overlapping}"
    # Splits were asked for by processes that held nothing unfinished, or by
    # a starved one's ask (each may get a split of the other process cut).
    asked_while_holding = [
        (remainder.worker, remainder.at, item.worker, item.leased_at, item.completed_at)
        for remainder in Event.objects.filter(job_id=job["id"], kind=EventKind.REMAINDER)
        for item in held_at(items, remainder.at)
        # Not the remainder itself: its taker's lease may carry the time its
        # transaction began, before the cut's event.
        if item.id != remainder.item_id and consumer(item.worker) == consumer(remainder.worker)
    ]
    cuts = {(consumer(asker), at) for asker, at, *_ in asked_while_holding}  # a cut's pieces share its time
    assert all(sum(asker == worker for asker, _ in cuts) <= len(leases) for worker, leases in asks.items()), (
        f"splits asked for by a process still reading (asker, when, the item it held: its loader, leased, completed): "
        f"{asked_while_holding}; events: {list(Event.objects.filter(job_id=job['id']).values_list('kind', 'worker', 'at', 'item_id', 'message'))}"
    )
    assert job["splits"] <= 2 + sum(map(len, asks.values())), (
        f"{job['splits']} splits between two processes that both read all along (starved asks: {asks})"
    )


def test_a_loop_that_waits_for_its_reader_gets_a_second_loader(sdk_env, celery_worker, tmp_path):
    # One process whose reader takes 5 ms a record and whose loop takes
    # nothing: the loop waits for data, so its second loader takes the other
    # slice while the first still reads.
    name = f"loader-starved-{uuid.uuid4().hex[:6]}"
    job, outputs = read_together(sdk_env, tmp_path, "loader", name, SLICES, LINES, [("p0", 0.0, 0.005)])
    items = leased(job)
    originals = sorted((item for item in items if item.parent_id is None), key=lambda item: item.leased_at)
    assert len(originals) == SLICES
    first, second = originals
    assert first.worker != second.worker, "one loader read both slices"
    assert second.leased_at < first.completed_at, (
        f"the second slice was leased at {second.leased_at}, once the first was done ({first.completed_at})"
    )
    # Taken by a starved ask, which the process said, with its wait.
    assert second.id in starved_asks(outputs["p0"][1]), outputs["p0"][1][-3000:]
