"""worker_sdk.loader_siblings: the marks that let an idle loader of a DataLoader in order leave the tail, without a server.

A loader that has read a lease in its pass leaves only while a sibling of
the same pass reads one; one that has read nothing yet never does; the last
one reading never does, however their looks interleave; loaders of another
pass (another iterator) never count; a copy that is not a loader being
started carries no shared memory.
"""

import copy
import multiprocessing
import pickle

import pytest

from worker_sdk import loader_siblings
from worker_sdk.protocol import Lease

pytestmark = pytest.mark.timeout(30)

SEED = 1234  # a DataLoader iterator's base seed: loader i is seeded SEED + i


def lease(i: int) -> Lease:
    return Lease(i, i, f"/d/{i}", 0, i)


def read_one(loader) -> None:
    """The loader read a lease of its own and is done with it (taking the next)."""
    for _ in loader.reading(iter([lease(99)])):
        pass


def test_a_loader_may_leave_while_a_sibling_reads_and_not_after():
    siblings = loader_siblings.Siblings()
    first, second = siblings.loader(0, SEED), siblings.loader(1, SEED + 1)
    read_one(second)
    assert not second.may_leave()  # nobody reads
    reading = first.reading(iter([lease(1), lease(2)]))
    next(reading)
    assert second.may_leave()
    next(reading)  # its next lease: still reading
    assert second.may_leave()
    with pytest.raises(StopIteration):
        next(reading)  # done with its leases: its mark goes before it asks for more
    assert not second.may_leave()


def test_a_loader_that_has_read_nothing_in_its_pass_waits():
    # At the start of a job of fewer items than loaders a split may give it
    # a range of its own to read beside its sibling.
    siblings = loader_siblings.Siblings()
    reading = siblings.loader(0, SEED).reading(iter([lease(1)]))
    next(reading)
    idle = siblings.loader(1, SEED + 1)
    assert not idle.may_leave()
    read_one(idle)
    assert idle.may_leave()


def test_of_two_loaders_that_look_at_once_one_stays():
    # Each clears its own mark as it looks; whichever looks second sees the
    # first one's mark gone, so at most one leaves.
    siblings = loader_siblings.Siblings()
    first, second = siblings.loader(0, SEED), siblings.loader(1, SEED + 1)
    first_reading = first.reading(iter([lease(1), lease(3)]))
    second_reading = second.reading(iter([lease(2), lease(4)]))
    next(first_reading), next(second_reading)
    assert first.may_leave()  # the second still reads
    assert not second.may_leave()  # the first cleared its mark as it looked


def test_loaders_of_another_pass_do_not_count():
    siblings = loader_siblings.Siblings()
    other_pass = siblings.loader(1, 99 + 1).reading(iter([lease(1)]))
    next(other_pass)
    mine = siblings.loader(0, SEED)
    read_one(mine)
    assert not mine.may_leave()


def test_a_closed_reader_clears_its_mark_and_closes_its_leases():
    siblings = loader_siblings.Siblings()
    closed = []

    def leases():
        try:
            yield lease(1)
            yield lease(2)
        finally:
            closed.append(True)

    reading = siblings.loader(0, SEED).reading(leases())
    next(reading)
    idle = siblings.loader(1, SEED + 1)
    read_one(idle)
    assert idle.may_leave()
    reading.close()
    assert closed == [True] and not idle.may_leave()


def test_a_loader_past_the_slots_never_leaves():
    assert loader_siblings.Siblings().loader(loader_siblings.SLOTS, SEED + loader_siblings.SLOTS) is None


def _reads_in_a_child(siblings, started, stop):
    loader = siblings.loader(1, SEED + 1)
    reading = loader.reading(iter([lease(1)]))
    next(reading)
    started.set()
    stop.wait(20)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_started_loader_shares_the_marks(method):
    context = multiprocessing.get_context(method)
    siblings = loader_siblings.Siblings()
    started, stop = context.Event(), context.Event()
    child = context.Process(target=_reads_in_a_child, args=(siblings, started, stop))
    child.start()
    try:
        assert started.wait(20)
        idle = siblings.loader(0, SEED)
        read_one(idle)
        assert idle.may_leave()
    finally:
        stop.set()
        child.join(20)
    assert child.exitcode == 0


def test_a_copy_that_is_no_starting_loader_has_no_marks():
    siblings = loader_siblings.Siblings()
    for copied in (pickle.loads(pickle.dumps(siblings)), copy.deepcopy(siblings)):
        assert copied.loader(0, SEED) is None
