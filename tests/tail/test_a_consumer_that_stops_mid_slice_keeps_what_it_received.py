"""A training loop that stops reading in the middle of a slice: what it received stays read, the rest goes back.

WorkQueue.dataset() reads ahead of its consumer (a block per slot), and a
WorkQueueLoader's loader processes read batches ahead of the loop; both
claim a record only when the loop receives it. A loop that stops after
a few hundred records of a 1,500-record slice and drops its iterator keeps
those as read: the rest of the range is cut off as a new item, which the
next reader reads, and no record is read twice or never.
"""

import uuid
from collections import Counter

import pytest

from .harness import Lines, check_exactly_once, one_slice_apart, sliced_job, start_reader, write_files

LINES = 1500
STOP_AFTER = 304  # 38 batches of 8


@pytest.mark.timeout(150)
@pytest.mark.parametrize("shape", [pytest.param("dataset", marks=pytest.mark.tf), "loader", "loader-batches"])
def test_a_loop_that_stops_mid_slice_leaves_only_its_unread_records(shape, sdk_env, celery_worker, tmp_path):
    works = write_files(tmp_path, 1, LINES)
    name = f"stop-{shape}-{uuid.uuid4().hex[:6]}"
    queue = sliced_job(works, name, sdk_env["SHARDLINE_RUN"], 1)
    barrier = tmp_path / "barrier-quitter"
    barrier.mkdir()
    quitter = Lines(start_reader(sdk_env, shape, name, 1, 0.0, "quitter", works, barrier, 1, stop_after=STOP_AFTER))
    assert quitter.ended_well(90)
    assert len(quitter.read) == STOP_AFTER
    marks = queue.watermarks()
    # What it received is done; the rest is pending (in more than one piece
    # when an idle slot or loader had a piece split off for itself meanwhile).
    assert marks["leased"] == 0 and marks["pending"] >= 1 and marks["done"] >= 1, marks

    barrier = tmp_path / "barrier-finisher"
    barrier.mkdir()
    finisher = Lines(start_reader(sdk_env, "ranges", name, 1, 0.0, "finisher", works, barrier, 1))
    assert finisher.ended_well(90)
    assert len(finisher.read) == LINES - STOP_AFTER
    check_exactly_once(works, Counter(quitter.read + finisher.read))
    job = queue._client.job(queue.job["id"])
    assert job["state"] == "done" and job["splits"] >= 1, job


def quit_then_finish(sdk_env, tmp_path, label, lines, shape, work, stop_after):
    """A ``shape`` loop working ``work`` s per record stops after ``stop_after`` records of a one-slice job; a ``ranges()`` loop reads the rest.

    Every record is read once, and the job ends.
    """
    works, queue, barriers = one_slice_apart(tmp_path, sdk_env, label, lines, "quitter", "finisher")
    quitter = Lines(
        start_reader(sdk_env, shape, queue.name, 1, work, "quitter", works, barriers[0], 1, stop_after=stop_after)
    )
    assert quitter.ended_well(90)
    assert len(quitter.read) == stop_after
    finisher = Lines(start_reader(sdk_env, "ranges", queue.name, 1, 0.0, "finisher", works, barriers[1], 1))
    assert finisher.ended_well(90)
    check_exactly_once(works, Counter(quitter.read + finisher.read))
    assert len(finisher.read) == lines - stop_after
    assert queue._client.job(queue.job["id"])["state"] == "done"


@pytest.mark.timeout(150)
def test_a_loop_that_stops_in_the_last_batches_of_the_queue_leaves_them_unread(sdk_env, celery_worker, tmp_path):
    # A slice of 60 records and a slow loop: a loader is at most the
    # DataLoader's prefetch (2 records) ahead of it, and finds the queue's
    # end once the loop has had its 59th record and works on it (50 ms).
    # The loop then stops: the last record was on its way, and goes back.
    quit_then_finish(sdk_env, tmp_path, "stop-last", 60, "loader", 0.05, 59)


@pytest.mark.timeout(150)
def test_a_loop_that_stops_before_the_last_partial_batch_leaves_it_unread(sdk_env, celery_worker, tmp_path):
    # 301 records in batches of 8: the loader's last batch holds 5, and the
    # fetcher collates it only after the loader's records end. The loop
    # works on its 37th batch (80 ms) and stops before it gets that one.
    # Before, the loader acknowledged it as its records ended, and its 5
    # records were never read.
    quit_then_finish(sdk_env, tmp_path, "stop-partial", 301, "loader-batches", 0.01, 296)
