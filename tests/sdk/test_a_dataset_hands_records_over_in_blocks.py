"""``dataset(hand_over_seconds=...)`` hands records to TensorFlow in blocks, unbatched inside it: the same records, once.

Record by record, tf.data's from_generator costs a Python call per record on
the pipeline's thread, and a pipeline of small records ran at a few thousand
records a second. In blocks a split still cuts no lower than what was handed
over (tests/tail runs that with real processes); a loop that stops leaves
the rest of its last block read and gives back everything after it. Real
server, real TensorFlow.
"""

import pytest

from tests.support import wait_until
from worker_sdk import WorkQueue

from .sliced_file import every_record, sliced_works

pytestmark = [pytest.mark.tf, pytest.mark.timeout(120)]
tf = pytest.importorskip("tensorflow", reason="the TF shapes need TensorFlow (pip install -e '.[tf]')")


def counts(queue):
    marks = queue.watermarks()
    return marks["done"], marks["leased"], marks["pending"]


@pytest.mark.parametrize("cycle_length", [1, 3])
def test_every_record_is_read_once_in_blocks(sdk_env, tmp_path, cycle_length):
    queue = WorkQueue(sliced_works(tmp_path, 6, 300), shuffle=False)
    dataset = queue.dataset(cycle_length=cycle_length, hand_over_seconds=0.01)
    read = [record for batch in dataset.batch(64).as_numpy_iterator() for record in batch]
    assert sorted(read) == sorted(every_record(6, 300))
    assert counts(queue) == (6, 0, 0)


def parse(item, offset):
    """Records of fixed shapes in a structure: (slice, [record, record / 2])."""
    from worker_sdk import readers

    for line in readers.records(item, offset):
        s, j = (int(x) for x in line.split(b","))
        yield s, [float(j), j / 2]


def test_records_of_a_structure_come_as_they_do_one_by_one(sdk_env, tmp_path):
    works = sliced_works(tmp_path, 3, 50)
    signature = (tf.TensorSpec([], tf.int64), tf.TensorSpec([2], tf.float32))
    by_block, by_record = (
        [
            (int(s), tuple(pair.tolist()))
            for s, pair in WorkQueue(works, shuffle=False, name=f"{name}-{tmp_path.name}")
            .dataset(parse, cycle_length=1, output_signature=signature, hand_over_seconds=seconds)
            .as_numpy_iterator()
        ]
        for name, seconds in (("blocks", 0.01), ("records", 0.0))
    )
    assert by_block == by_record == [(s, (float(j), j / 2)) for s in range(3) for j in range(50)]


@pytest.mark.parametrize(
    "signature, seconds, message",
    [
        (tf.TensorSpec([None], tf.string), 0.01, "records of fixed shapes"),
        (tf.TensorSpec([], tf.string), -1.0, "hand_over_seconds must be a number of seconds > 0"),
        (tf.TensorSpec([], tf.string), float("inf"), "hand_over_seconds must be a number of seconds > 0"),
    ],
)
def test_a_block_needs_records_of_fixed_shapes_and_a_time(sdk_env, tmp_path, signature, seconds, message):
    queue = WorkQueue(sliced_works(tmp_path, 2, 10), shuffle=False)
    with pytest.raises(ValueError, match=message):
        queue.dataset(output_signature=signature, hand_over_seconds=seconds)
    assert counts(queue) == (0, 0, 2)  # nothing was leased


def test_a_loop_that_stops_leaves_its_last_block_read_and_gives_back_the_rest(sdk_env, tmp_path):
    queue = WorkQueue(sliced_works(tmp_path, 2, 2000), shuffle=False)
    records = queue.dataset(cycle_length=1, hand_over_seconds=0.01).as_numpy_iterator()
    read = [next(records) for _ in range(1500)]
    del records  # the loop stops in the first slice
    wait_until(lambda: counts(queue)[1] == 0, 10, 0.02, "every lease given back")
    rest = list(queue.dataset(cycle_length=1).as_numpy_iterator())
    everything = every_record(2, 2000)
    assert read == everything[:1500]
    # What the loop did not get of its last block counts as read: the
    # records right after the last one it got, and no more than a block.
    unread = len(everything) - len(read) - len(rest)
    assert 0 <= unread <= 4096
    # (The first slice's rest comes back as a new item after the second slice.)
    assert sorted(rest) == sorted(everything[1500 + unread :]) and len(set(rest)) == len(rest)


def pairs_with_a_bad_one(item, offset):
    """Records [j, j]; the 250th is [j, j, j], which output_signature does not allow."""
    from worker_sdk import readers

    for line in readers.records(item, offset):
        j = int(line.split(b",")[1])
        yield [j, j, j] if j == 250 else [j, j]


def test_a_record_that_does_not_match_its_signature_comes_after_the_records_before_it(sdk_env, tmp_path):
    queue = WorkQueue(sliced_works(tmp_path, 1, 400), shuffle=False)
    dataset = queue.dataset(
        pairs_with_a_bad_one, 1, output_signature=tf.TensorSpec([2], tf.int64), hand_over_seconds=0.01
    )
    got = []
    with pytest.raises(tf.errors.OpError, match=r"does not match output_signature.*shape \(3,\) where \(2,\)"):
        for pair in dataset.as_numpy_iterator():
            got.append(pair.tolist())
    assert got == [[j, j] for j in range(250)]


def test_none_hands_records_over_one_at_a_time_as_0_does(sdk_env, tmp_path):
    queue = WorkQueue(sliced_works(tmp_path, 2, 10), shuffle=False)
    assert list(queue.dataset(hand_over_seconds=None).as_numpy_iterator()) == every_record(2, 10)


def slow_records(item, offset):
    """The SDK's records, 10 ms each: a reader slower than the loop."""
    import time

    from worker_sdk import readers

    for line in readers.records(item, offset):
        time.sleep(0.01)
        yield line


def test_a_loop_that_stops_while_a_slow_reader_fills_a_block_gives_its_lease_back_at_once(sdk_env, tmp_path):
    # A slot read on to the block's full size before it saw the stop: with
    # hand_over_seconds=5, 30 s (the close's own limit) after 100 records.
    queue = WorkQueue(sliced_works(tmp_path, 1, 3000), shuffle=False)
    records = queue.dataset(slow_records, 1, hand_over_seconds=5.0).as_numpy_iterator()
    read = [next(records) for _ in range(100)]
    del records
    wait_until(lambda: counts(queue)[1] == 0, 10, 0.02, "the lease given back")
    rest = list(queue.dataset(cycle_length=1).as_numpy_iterator())
    assert set(read).isdisjoint(rest) and len(read) + len(rest) <= 3000
