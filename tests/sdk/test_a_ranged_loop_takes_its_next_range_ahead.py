"""A loop over record ranges in the training process leases its next range ahead: its thread waits on no request between ranges.

``ranges()`` and a DataLoader without loader processes over a reader
(``WorkQueueDataset(queue, reader=...)``) read one range at a time in the
loop's own process. With ``WorkQueue(look_ahead=1)`` (the default) the next
range is leased on a thread of its own while the loop reads one
(worker_sdk.look_ahead), and the one finished is acknowledged by that take:
before, each range cost the loop's thread a take (and, through a reader, a
completion of its own), 15-30 ms each on a 2-core machine. A range taken
ahead and not started goes back unread when the loop stops, and to an idle
worker that asks for it. Real server (the ASGI one of tests/support.py).
"""

import json
import os
import subprocess
import sys
import threading
import uuid
from datetime import timedelta

import pytest
from torch.utils.data import DataLoader

from server.models import Event, Item
from tests.support import ROOT, wait_until
from worker_sdk import WorkQueue, readers
from worker_sdk.client import Client
from worker_sdk.leaser import GIVE_BACK_REASON
from worker_sdk.look_ahead import STOPPED_REASON
from worker_sdk.torch import WorkQueueDataset

from .sliced_file import every_record, sliced_works

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def senders(monkeypatch):
    """The thread each take and each completion of this process was sent from, in order."""
    seen = []
    take, complete, complete_many = Client.take, Client.complete, Client.complete_many

    def recorded(kind, call):
        def send(self, *args, **kwargs):
            seen.append((kind, threading.current_thread() is threading.main_thread()))
            return call(self, *args, **kwargs)

        return send

    monkeypatch.setattr(Client, "take", recorded("take", take))
    monkeypatch.setattr(Client, "complete", recorded("complete", complete))
    monkeypatch.setattr(Client, "complete_many", recorded("complete", complete_many))
    return seen


def counts(queue):
    marks = queue.watermarks()
    return marks["done"], marks["leased"], marks["pending"]


def test_ranges_leases_the_next_range_while_the_loop_reads_and_gives_back_what_it_did_not_start(sdk_env, tmp_path):
    # One range ahead, whatever the pace: this loop takes no time, so the
    # default would keep more (worker_sdk.ahead_depth).
    queue = WorkQueue(sliced_works(tmp_path, 4, 5), shuffle=False, look_ahead=1)
    works = queue.ranges()
    first = next(works)
    assert list(first.records()) == every_record(4, 5)[:5]
    second = next(works)
    assert second.start == 5
    # Near a job's end (here, all of it) a worker takes ahead once its pace is known: from its second range on.
    wait_until(lambda: counts(queue) == (1, 2, 1), 10, 0.02, "the third range leased ahead, the first acknowledged")
    assert list(second.records()) == every_record(4, 5)[5:10]
    # The loop stops after the second range: the third, taken ahead and not
    # started, goes back unread (its attempt returned); the second, in hand
    # and read to its end, is given back too, as a stopped loop's item is.
    works.close()
    rows = dict(Item.objects.filter(job_id=queue.job["id"]).values_list("position", "attempts"))
    assert rows[2] == 0
    released = Event.objects.filter(job_id=queue.job["id"], kind="released").values_list("message", flat=True)
    assert list(released) == [STOPPED_REASON]


def test_ranges_sends_no_take_or_completion_from_the_loops_thread_after_its_first(sdk_env, tmp_path, senders):
    queue = WorkQueue(sliced_works(tmp_path, 6, 5), shuffle=False)
    read = [record for work in queue.ranges() for record in work.records()]
    assert read == every_record(6, 5)
    assert counts(queue) == (6, 0, 0)
    on_the_loop = [kind for kind, main in senders if main]
    # Its first take (nothing was ahead), and its second: a worker takes
    # ahead near the end once its pace is known. The last take, finding the
    # end, is the loop's own too: it carries the last range's completion.
    assert on_the_loop.count("complete") == 0, senders
    assert on_the_loop.count("take") <= 3, senders
    assert any(kind == "take" and not main for kind, main in senders)


def test_a_dataloader_over_a_reader_without_loader_processes_takes_ahead_and_acknowledges_with_its_takes(
    sdk_env, tmp_path, senders
):
    queue = WorkQueue(sliced_works(tmp_path, 6, 5), shuffle=False)
    loop = DataLoader(WorkQueueDataset(queue, reader=readers.records), batch_size=None)
    assert list(loop) == every_record(6, 5)
    assert counts(queue) == (6, 0, 0)
    on_the_loop = [kind for kind, main in senders if main]
    # Each range's completion rode a take: none was sent alone from the
    # loop's thread (before, one per range, and a take after it).
    assert on_the_loop.count("complete") == 0, senders
    assert on_the_loop.count("take") <= 3, senders


def test_look_ahead_0_reads_ranges_as_before(sdk_env, tmp_path, senders):
    queue = WorkQueue(sliced_works(tmp_path, 4, 5), shuffle=False, look_ahead=0)
    read = [record for work in queue.ranges() for record in work.records()]
    assert read == every_record(4, 5)
    assert all(main for _kind, main in senders), senders


def test_a_range_taken_ahead_goes_to_an_idle_worker_unread_and_every_record_is_read_once(sdk_env, tmp_path):
    # The slow worker is a process of its own (tests/sdk/sdk_worker.py): two
    # queues of one process share its end-of-queue mark, and the idle one's
    # would count the slow one's leases as not worth waiting for.
    works = sliced_works(tmp_path, 3, 5)
    name = f"ranged-ahead-{uuid.uuid4().hex[:8]}"
    # Its first range takes no time (its pace is then known, and it takes
    # ahead); its second waits 600 s before its first record.
    args = ["--works", json.dumps(works), "--cost", "600", "--first-cost", "0", "--look-ahead", "1"]
    slow = subprocess.Popen(
        [sys.executable, "tests/sdk/sdk_worker.py", "--items", "0", *args, "--name", name, "--worker", "slow"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
    )
    try:
        lines = [slow.stdout.readline().strip() for _ in range(8)]
        assert lines == [
            f"start {works[0]}",
            *(f"record 0,{j}" for j in range(5)),
            f"done {works[0]}",
            f"start {works[1]}",
        ]
        fast = WorkQueue(works, shuffle=False, name=name, worker="fast")
        leased = Item.objects.filter(job_id=fast.job["id"], state="leased", worker="slow")
        wait_until(lambda: leased.count() == 2, 10, 0.02, "the third range taken ahead of the second")
        # The idle worker has nothing to read: the slow one's heartbeat gives
        # its range taken ahead back, and the idle worker's take leases it.
        reading = fast.ranges()
        given = next(reading)
        assert given.start == 10
        read = list(given.records())
        # The slow worker dies holding the second range, none of it read: its
        # dropped heartbeat hands it on a second later. It dies once a
        # heartbeat came after the give-back (it extends the lease past the
        # give-back's time). That one may have been answered at once: a split
        # asked of the second range, which it cannot answer before it reads
        # it, is told at once (a slow first range under load makes the range
        # worth splitting). Then the server's wait for its next heartbeat
        # hands it on, a third of the lease timeout later (server/holders.py);
        # before, it waited out the lease.
        released_at = Event.objects.get(job_id=fast.job["id"], kind="released").at
        lease_time = timedelta(seconds=fast.job["lease_timeout"])
        held = Item.objects.filter(job_id=fast.job["id"], position=1, expires_at__gt=released_at + lease_time)
        wait_until(held.exists, 10, 0.02, "the slow worker's heartbeat after the give-back")
        slow.kill()
        slow.wait(10)
        read += [record for work in reading for record in work.records()]
    finally:
        slow.kill()
        slow.wait(10)
    assert read == every_record(3, 5)[10:] + every_record(2, 5)[5:]
    rows = Item.objects.filter(job_id=fast.job["id"]).order_by("position").values_list("state", "worker", "attempts")
    # The third's attempt by the slow worker was given back with it.
    assert list(rows) == [("done", "slow", 1), ("done", "fast", 2), ("done", "fast", 1)]
    released = Event.objects.filter(job_id=fast.job["id"], kind="released").values_list("worker", "message")
    assert list(released) == [("slow", GIVE_BACK_REASON)]
