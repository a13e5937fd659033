"""``items()`` leases the next item while the loop works on this one, and an idle worker gets it back unread.

WorkQueue's ``look_ahead`` (worker_sdk.look_ahead): the take runs on a thread
of its own, so the training loop does not wait on it; the finished item is
acknowledged by the take after. An item taken ahead and not started is
asked back for a worker that has nothing to read (server/services/give_back.py).
Real processes and the ASGI server of tests/support.py.
"""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta

from server.models import Event, Item
from tests.support import ROOT, wait_until
from worker_sdk import WorkQueue
from worker_sdk.client import Client
from worker_sdk.leaser import GIVE_BACK_REASON
from worker_sdk.look_ahead import STOPPED_REASON


def counts(queue):
    marks = queue.watermarks()
    return marks["done"], marks["leased"], marks["pending"]


def test_the_next_item_is_leased_while_the_loop_works_and_the_finished_one_acknowledged_with_it(sdk_env):
    queue = WorkQueue(["/a", "/b", "/c", "/d"], shuffle=False, look_ahead=1)
    iterator = queue.items()
    # Near a job's end (here, all of it) a worker takes ahead once its pace
    # is known: from its second item on.
    assert next(iterator) == "/a"
    assert next(iterator) == "/b"
    wait_until(lambda: counts(queue) == (1, 2, 1), 10, 0.02, "/c leased ahead while the loop holds /b")
    assert next(iterator) == "/c"
    wait_until(lambda: counts(queue) == (2, 2, 0), 10, 0.02, "/b acknowledged by the take of /d")
    # The loop stops: the item in hand is failed (another attempt reads it),
    # the one taken ahead goes back unread, its attempt returned.
    iterator.close()
    assert counts(queue) == (2, 0, 2)
    rows = dict(Item.objects.filter(job_id=queue.job["id"]).values_list("position", "attempts"))
    assert rows == {0: 1, 1: 1, 2: 1, 3: 0}
    released = Event.objects.filter(job_id=queue.job["id"], kind="released").values_list("message", flat=True)
    assert list(released) == [STOPPED_REASON]
    assert list(queue.items()) == ["/c", "/d"]


def test_look_ahead_0_takes_each_item_when_the_loop_asks(sdk_env):
    queue = WorkQueue(["/a", "/b", "/c"], shuffle=False, look_ahead=0)
    iterator = queue.items()
    assert next(iterator) == "/a"
    assert next(iterator) == "/b"
    # Nothing should come, so there is no marker to wait on: as long as a look-ahead would take to lease the next.
    time.sleep(0.3)
    assert counts(queue) == (1, 1, 1)
    iterator.close()
    assert counts(queue) == (1, 0, 2)


def test_a_slow_workers_item_taken_ahead_goes_to_the_idle_worker_unread(sdk_env):
    name = f"ahead-{uuid.uuid4().hex[:8]}"
    items = ["/items/0000", "/items/0001", "/items/0002"]
    # Its first item takes no time (its pace is then known, and it takes
    # ahead), its second 600 s.
    args = ["--items", "3", "--cost", "600", "--first-cost", "0", "--look-ahead", "1", "--name", name]
    args += ["--worker", "slow"]
    slow = subprocess.Popen(
        [sys.executable, "tests/sdk/sdk_worker.py", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
    )
    try:
        for expected in ("start /items/0000", "done /items/0000", "start /items/0001"):
            assert slow.stdout.readline().strip() == expected
        queue = WorkQueue(items, shuffle=False, name=name, worker="fast")
        leased = lambda: Item.objects.filter(job_id=queue.job["id"], state="leased", worker="slow").count()  # noqa: E731
        wait_until(lambda: leased() == 2, 10, 0.02, "the slow worker's take ahead of /items/0002")

        iterator = queue.items()
        began = time.monotonic()
        assert next(iterator) == "/items/0002"
        handed = time.monotonic() - began
        assert handed < 5, f"the item taken ahead came after {handed:.1f} s"

        # The slow worker dies holding /items/0001: its dropped heartbeat hands
        # it on. It dies once its next heartbeat is held (it extends the lease
        # past the give-back's time), not between two heartbeats.
        released_at = Event.objects.get(job_id=queue.job["id"], kind="released").at
        lease_time = timedelta(seconds=queue.job["lease_timeout"])
        held = Item.objects.filter(job_id=queue.job["id"], position=1, expires_at__gt=released_at + lease_time)
        wait_until(held.exists, 10, 0.02, "the slow worker's heartbeat after the give-back")
        slow.kill()
        slow.wait(10)
        assert list(iterator) == ["/items/0001"]
    finally:
        slow.kill()
        slow.wait(10)
    fields = ("id", "position", "attempts", "worker", "state")
    rows = {items[row["position"]]: row for row in Item.objects.filter(job_id=queue.job["id"]).values(*fields)}
    assert {item: (row["state"], row["worker"]) for item, row in rows.items()} == {
        "/items/0000": ("done", "slow"),
        "/items/0001": ("done", "fast"),
        "/items/0002": ("done", "fast"),
    }
    assert rows["/items/0002"]["attempts"] == 1  # the slow worker's lease of it gave its attempt back
    released = Event.objects.filter(job_id=queue.job["id"], kind="released")
    assert list(released.values_list("item_id", "worker", "message")) == [
        (rows["/items/0002"]["id"], "slow", GIVE_BACK_REASON)
    ]


def test_a_deep_look_ahead_leases_several_in_one_take_and_reads_each_item_once(sdk_env):
    works = [f"/w/{i}" for i in range(40)]
    queue = WorkQueue(works, shuffle=False, look_ahead=8)
    iterator = queue.items()
    read = [next(iterator), next(iterator)]
    wait_until(lambda: counts(queue)[1] == 9, 10, 0.02, "8 items leased ahead of the one in hand")
    read += list(iterator)
    assert read == works
    assert counts(queue) == (40, 0, 0)
    assert not Event.objects.filter(job_id=queue.job["id"], kind="released").exists()


def test_items_taken_ahead_before_a_restore_are_given_back_not_read(sdk_env):
    works = [f"/w/{i}" for i in range(8)]
    queue = WorkQueue(works, shuffle=False, look_ahead=2)
    iterator = queue.items()
    read = [next(iterator), next(iterator)]
    # /w/0's completion rides the take ahead that follows the start of /w/1:
    # until it lands, a snapshot would not hold it.
    wait_until(lambda: counts(queue)[0] == 1, 10, 0.02, "/w/0 acknowledged")
    snapshot = queue.snapshot()  # /w/0 done, /w/1 in hand
    read.append(next(iterator))
    # Three leased is also /w/1, /w/2 and /w/3 before the take that acknowledges
    # /w/1 and leases /w/4. A restore while that take is on its way can
    # leave /w/1 leased by it after the restore: the look-ahead gives that
    # lease back as fenced, and /w/1 is then read last, once.
    wait_until(lambda: counts(queue) == (2, 3, 3), 10, 0.02, "/w/3 and /w/4 leased ahead of /w/2, /w/1 done")
    queue.restore(snapshot["id"])  # every lease fenced: those taken ahead too
    again = list(iterator)
    assert read == ["/w/0", "/w/1", "/w/2"]
    # What followed the snapshot, each once: nothing from before the restore.
    assert again == works[1:]
    assert counts(queue) == (8, 0, 0)


def test_an_item_a_take_ahead_leases_again_after_a_restore_is_read_not_left_to_expire(sdk_env, monkeypatch):
    # The take ahead that acknowledges /w/1 leaves only after the restore
    # that re-opened /w/1: its completion is refused, and the same take
    # leases /w/1 anew (a lease id is its item's). That new lease once
    # went with the refused one: held by nobody, it waited out its lease.
    works = [f"/w/{i}" for i in range(6)]
    queue = WorkQueue(works, shuffle=False, look_ahead=1, lease_timeout=2)
    iterator = queue.items()
    read = [next(iterator), next(iterator)]  # /w/1 started; /w/0's completion goes with the next take ahead
    wait_until(lambda: counts(queue) == (1, 2, 3), 10, 0.02, "/w/0 done, /w/2 leased ahead of /w/1")
    snapshot = queue.snapshot()  # /w/0 done, /w/1 in hand: the restore re-opens /w/1 first
    second = Item.objects.get(job_id=queue.job["id"], position=1).id
    real_take = Client.take
    left, restored, landed = threading.Event(), threading.Event(), threading.Event()

    def take_after_the_restore(client, job_id, request):
        if not (request.ahead and any(c.id == second for c in request.complete)):
            return real_take(client, job_id, request)
        left.set()
        restored.wait(10)
        try:
            return real_take(client, job_id, request)
        finally:
            landed.set()

    monkeypatch.setattr(Client, "take", take_after_the_restore)
    read.append(next(iterator))  # /w/2 started: the take ahead acknowledging /w/1 waits for the restore
    # It must have left first. On a busy machine the restore once ran between
    # the look-ahead's thread moving /w/1 to the stream's finished list and
    # its take: the restore cleared that list and the take carried nothing.
    assert left.wait(10)
    queue.restore(snapshot["id"])
    restored.set()
    assert landed.wait(10)
    again = list(iterator)
    assert read == ["/w/0", "/w/1", "/w/2"]
    assert sorted(again) == works[1:]  # each once more, /w/1 included
    assert counts(queue) == (6, 0, 0)
    assert not Event.objects.filter(job_id=queue.job["id"], kind="expired").exists()


def test_a_worker_paused_past_its_leases_never_starts_the_item_it_took_ahead(sdk_env):
    # A process stopped longer than its lease timeout (a long GC pause, a
    # preempted VM): its leases expire and another worker reads their items.
    # The item in hand is read twice (fenced: only the new holder's
    # completion counts), as without a look-ahead; the one taken ahead is
    # not: the heartbeat that says it is lost takes it out of the loop's reach.
    name = f"paused-{uuid.uuid4().hex[:8]}"
    items = ["/items/0000", "/items/0001", "/items/0002"]
    args = ["--items", "3", "--cost", "4", "--first-cost", "0", "--look-ahead", "1", "--lease-timeout", "1"]
    paused = subprocess.Popen(
        [sys.executable, "tests/sdk/sdk_worker.py", *args, "--name", name, "--worker", "paused"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
    )
    try:
        for expected in ("start /items/0000", "done /items/0000", "start /items/0001"):
            assert paused.stdout.readline().strip() == expected
        queue = WorkQueue(items, shuffle=False, name=name, worker="other")
        leased = Item.objects.filter(job_id=queue.job["id"], state="leased", worker="paused")
        wait_until(lambda: leased.count() == 2, 10, 0.02, "/items/0002 taken ahead of /items/0001")
        paused.send_signal(signal.SIGSTOP)

        iterator = queue.items()
        # Both items it held, each once its lease expired (the takes wait on the server).
        taken = [next(iterator), next(iterator)]
        paused.send_signal(signal.SIGCONT)
        taken += list(iterator)
        output, errors = paused.communicate(timeout=30)
    finally:
        paused.kill()
        paused.wait(10)
    assert sorted(taken) == ["/items/0001", "/items/0002"]  # in the order their leases expired
    # It finished the item in hand (its completion refused), never began the other.
    assert output.splitlines() == ["done /items/0001", "finished"], errors
    rows = Item.objects.filter(job_id=queue.job["id"]).order_by("position").values_list("state", "worker", "attempts")
    assert list(rows) == [("done", "paused", 1), ("done", "other", 2), ("done", "other", 2)]


def test_an_item_given_back_and_leased_again_by_the_same_process_is_still_held(sdk_env, monkeypatch):
    # After a give-back the consumer takes for itself, and may lease the same
    # item (the same id, a new token) before the release's answer is handled:
    # that lease must stay held, so that its heartbeat keeps it.
    queue = WorkQueue(["/a"], shuffle=False)
    leaser = queue.consumers.whole_items_stream().leaser()
    (first,), _answer = leaser.take(wait=False)
    again = []
    release = leaser.client.release

    def release_then_take(lease_id, token, reason):
        answer = release(lease_id, token, reason)
        again.extend(leaser.take(wait=False)[0])
        return answer

    monkeypatch.setattr(leaser.client, "release", release_then_take)
    assert leaser.release_unread(first, GIVE_BACK_REASON)
    assert [(lease.id, lease.token == first.token) for lease in again] == [(first.id, False)]
    assert leaser.held.known() == 1
