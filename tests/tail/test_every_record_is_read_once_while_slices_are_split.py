"""The liquid tail with real processes: one slow reader, its unread records split off to the others, each record read once.

Three reader processes share a sliced job of two CSV files and start
reading together; one spends 20x longer on each record. The fast ones run out of slices while the slow one
still holds most of its own, so splits happen (the test checks that they
did), remainders are split again, and every record of the files is read
exactly once in every round: counted and compared line by line.
SHARDLINE_TAIL_ROUNDS sets the rounds (the suite runs two per shape).
"""

import os
import random
import uuid
from collections import Counter

import pytest

from .harness import check_exactly_once, collect, records_read, sliced_job, start_reader, write_files

ROUNDS = int(os.environ.get("SHARDLINE_TAIL_ROUNDS", "2"))
SLICES = 6
LINES = 600  # per file: slices of 200 records


@pytest.mark.timeout(120 + 90 * ROUNDS)
@pytest.mark.parametrize(
    "shape",
    [
        "ranges",
        "torch",
        "loader",
        "loader-batches",
        pytest.param("dataset", marks=pytest.mark.tf),
        pytest.param("dataset-blocks", marks=pytest.mark.tf),
    ],
)
def test_every_record_is_read_once_while_slices_are_split(shape, sdk_env, celery_worker, tmp_path):
    rng = random.Random()
    splits = 0
    for round_no in range(ROUNDS):
        works = write_files(tmp_path, 2, LINES)
        name = f"tail-{shape}-{uuid.uuid4().hex[:6]}"
        queue = sliced_job(works, name, sdk_env["SHARDLINE_RUN"], SLICES)
        delays = [0.0005, 0.0005, 0.01]
        rng.shuffle(delays)
        barrier = tmp_path / f"barrier-{round_no}"
        barrier.mkdir()
        children = [
            start_reader(sdk_env, shape, name, SLICES, delay, f"r{round_no}-{index}", works, barrier, len(delays))
            for index, delay in enumerate(delays)
        ]
        outputs = collect(children, 80, "the readers")
        for code, stdout, stderr in outputs:
            assert code == 0 and "finished" in stdout, f"a reader failed (exit {code}):\n{stderr[-3000:]}"
        check_exactly_once(works, Counter(record for _code, stdout, _err in outputs for record in records_read(stdout)))
        job = queue._client.job(queue.job["id"])
        marks = queue.watermarks()
        assert (job["state"], marks["leased"], marks["pending"]) == ("done", 0, 0), (job, marks)
        assert marks["done"] == SLICES + job["splits"]  # each split made one more item
        splits += job["splits"]
    assert splits > 0, "no split happened: the test did not exercise the liquid tail"
