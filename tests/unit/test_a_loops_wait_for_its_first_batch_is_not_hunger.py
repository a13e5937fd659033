"""worker_sdk.turns.Hunger: the loop's wait for its first batch of a pass counts only past FIRST_BATCH_SECONDS.

A sibling loader takes while one reads once the loop has been starved
STARVED_SECONDS since the last take. At a pass's start the loaders start,
take and open their first item, and a busy machine took 0.2-0.35 s there
for a loop that was fed all along afterwards: a sibling took at the start.
"""

import multiprocessing

import pytest

from worker_sdk import turns

pytestmark = pytest.mark.timeout(30)


class FakeTime:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(turns, "monotonic", fake)
    return fake


def test_the_first_batchs_wait_counts_past_the_start_allowance_and_later_waits_past_a_handover(clock):
    hunger = turns.Hunger(multiprocessing.get_context("fork"))
    hunger.reset()
    hunger.wait()
    clock.now += 0.9
    assert hunger.starved() == 0.0, "the pass's start counted as hunger"
    clock.now += 0.3
    assert hunger.starved() == pytest.approx(1.2 - turns.FIRST_BATCH_SECONDS)
    hunger.got()
    fed = hunger.starved()
    assert fed == pytest.approx(1.2 - turns.FIRST_BATCH_SECONDS)

    # Fed now: each later wait counts past a batch's handover.
    hunger.wait()
    clock.now += 0.3
    assert hunger.starved() == pytest.approx(fed + 0.3 - turns.HANDOVER_SECONDS)
    hunger.got()

    # A new pass starts unfed again.
    hunger.reset()
    hunger.wait()
    clock.now += 0.5
    hunger.got()
    assert hunger.starved() == 0.0
