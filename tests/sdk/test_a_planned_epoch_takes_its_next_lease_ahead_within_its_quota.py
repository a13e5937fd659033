"""A synchronous rank that reads its planned epoch itself takes its next lease ahead, never past its quota.

SyncLoader without loader processes reads this way (``sync.read_epoch(...,
ahead=1)``): records on the training thread, the next lease taken on a
thread meanwhile, each item's completion riding the take after it. A take
ahead asks for no more records than the quota has left beyond what the
rank holds unread, so no rank holds records another rank's quota needs.
"""

import collections

import pytest

from worker_sdk import WorkQueue, sync
from worker_sdk.client import Client
from worker_sdk.transport import Transport

pytestmark = pytest.mark.timeout(60)


def sliced_works(tmp_path, files=3, per_file=2, lines=10):
    """``files`` CSV files of ``lines`` lines ``f,j``, each cut into ``per_file`` explicit slices."""
    works, step = [], lines // per_file
    for f in range(files):
        path = tmp_path / f"part-{f}.csv"
        path.write_text("".join(f"{f},{j}\n" for j in range(lines)))
        works += [f"{path}?start={start}&end={start + step}" for start in range(0, lines, step)]
    return works


@pytest.fixture
def sent(monkeypatch):
    """What the process sent: leases asked for and records leased per take, and acknowledgements sent on their own."""
    seen = {"leased": [], "asked": [], "completes": 0}
    take, request = Client.take, Transport.request

    def counted_take(self, job_id, body):
        answer = take(self, job_id, body)
        seen["asked"].append(body.count)
        seen["leased"].append(sum(lease.end - lease.start for lease in answer.leases))
        return answer

    def counted_request(self, method, path, **kwargs):
        if path.endswith("/complete/"):
            seen["completes"] += 1
        return request(self, method, path, **kwargs)

    monkeypatch.setattr(Client, "take", counted_take)
    monkeypatch.setattr(Transport, "request", counted_request)
    return seen


@pytest.mark.parametrize("ahead", [1, 2])
def test_a_quota_short_of_the_epoch_leases_exactly_its_records(sdk_env, tmp_path, sent, ahead):
    queue = WorkQueue(sliced_works(tmp_path), shuffle=False, name="planned-ahead")
    records = list(sync.read_epoch(queue, 0, quota=12, ahead=ahead))
    assert records == [f"0,{j}".encode() for j in range(10)] + [b"1,0", b"1,1"]
    # The take that reached the third slice cut it to the 2 records the quota
    # had left (the rest of that slice stays pending): nothing leased ahead
    # went back.
    assert sum(sent["leased"]) == 12
    assert queue.epoch_records(0)["unread"] == 18
    queue.close()
    marks = queue.watermarks()
    # Done: two slices and the two records cut from the third; pending: its
    # other three records and the three slices not touched.
    assert (marks["done"], marks["leased"], marks["pending"]) == (3, 0, 4)


@pytest.mark.parametrize("ahead, alone", [(1, {1, 2}), (0, {6})])
def test_each_completion_rides_the_take_after_it(sdk_env, tmp_path, sent, ahead, alone):
    queue = WorkQueue(sliced_works(tmp_path), shuffle=False, name="planned-ahead")
    records = list(sync.read_epoch(queue, 0, quota=30, ahead=ahead))
    assert collections.Counter(records) == collections.Counter(f"{f},{j}".encode() for f in range(3) for j in range(10))
    # With a lease ahead, the last item, and the one before it unless its
    # reader was done before the last take left, go as the epoch's reading
    # ends (no take follows them); without, every item is acknowledged alone.
    assert sent["completes"] in alone
    assert sum(sent["leased"]) == 30
    queue.close()
    marks = queue.watermarks()
    assert (marks["done"], marks["leased"], marks["pending"]) == (6, 0, 0)


def test_records_handed_to_another_process_are_never_read_ahead(sdk_env, tmp_path):
    queue = WorkQueue(sliced_works(tmp_path), shuffle=False, name="planned-ahead")
    with pytest.raises(ValueError, match="ahead=0"):
        next(sync.read_epoch(queue, 0, handoff=True, ahead=1))


def test_leases_taken_two_at_a_time_halve_the_takes_and_keep_to_the_quota(sdk_env, tmp_path, sent):
    queue = WorkQueue(sliced_works(tmp_path), shuffle=False, name="planned-ahead")
    records = list(sync.read_epoch(queue, 0, quota=30, ahead=2))
    assert collections.Counter(records) == collections.Counter(f"{f},{j}".encode() for f in range(3) for j in range(10))
    leasing = [records for records in sent["leased"] if records]
    # The rank's own first take, then takes of two slices (10 records) each
    # once none is left ahead: 4 takes for 6 slices, where one at a time took 6.
    assert sum(leasing) == 30 and len(leasing) <= 4 and max(leasing) == 10
    queue.close()
    marks = queue.watermarks()
    assert (marks["done"], marks["leased"], marks["pending"]) == (6, 0, 0)


def test_a_deep_take_ahead_leases_what_the_quota_has_room_for_and_completes_it_in_one_request(sdk_env, tmp_path, sent):
    # SyncLoader's depth (torch_sync.AHEAD_LEASES): a first take of one lease
    # (nothing says yet how wide the slices are), then one take of as many as
    # the quota has room for at that width: none leased past it and given
    # back. No take follows them: their completions go together at the end.
    queue = WorkQueue(sliced_works(tmp_path), shuffle=False, name="planned-ahead")
    records = list(sync.read_epoch(queue, 0, quota=30, ahead=64))
    assert collections.Counter(records) == collections.Counter(f"{f},{j}".encode() for f in range(3) for j in range(10))
    assert sent["asked"] == [1, 5] and sent["leased"] == [5, 25] and sent["completes"] == 1
    queue.close()
    marks = queue.watermarks()
    assert (marks["done"], marks["leased"], marks["pending"]) == (6, 0, 0)


def test_a_server_without_the_batch_endpoint_gets_one_completion_per_request(sdk_env, tmp_path, sent, monkeypatch):
    # A server older than the SDK answers the batch's path 404, as this one
    # answers a path it does not serve: the SDK completes lease by lease.
    monkeypatch.setattr("worker_sdk.client.COMPLETE_PATH", "/api/v1/leases/complete-many-not-served/")
    queue = WorkQueue(sliced_works(tmp_path), shuffle=False, name="planned-ahead")
    records = list(sync.read_epoch(queue, 0, quota=30, ahead=64))
    assert len(records) == 30
    # The first item's completion may ride the second take; the rest go one per request.
    assert sent["completes"] in (5, 6)
    queue.close()
    marks = queue.watermarks()
    assert (marks["done"], marks["leased"], marks["pending"]) == (6, 0, 0)
