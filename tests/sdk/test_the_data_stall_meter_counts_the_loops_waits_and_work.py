"""worker_sdk.stall on its own: a meter splits a loop's time into waits for data and its own work, exactly once.

No server: the clock the meters add to, the generator every consumer shape
wraps, what a loader process sees of its main process's clock, and what a
heartbeat sends. Time is a fake monotonic clock, so the sums are exact.
"""

import multiprocessing

import pytest

from worker_sdk import stall

# Job ids no server hands out: these tests' clocks stay apart from the live tests' in this process.
JOB = 10**15


class FakeTime:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake_time(monkeypatch):
    time = FakeTime()
    monkeypatch.setattr(stall, "monotonic", time)
    return time


def test_a_meter_counts_the_time_between_asking_and_getting_as_waited_and_the_rest_as_work(fake_time):
    clock = stall.Clock()
    meter = stall.Meter(lambda: clock)
    for _ in range(10):
        meter.wait()
        fake_time.advance(0.04)  # the reader: 4x the model
        meter.got()
        fake_time.advance(0.01)  # the model
    meter.wait()
    meter.stop()
    waited, busy = clock.reading()
    assert waited == pytest.approx(0.4)
    assert busy == pytest.approx(0.1)


def test_timed_counts_each_element_and_the_wait_that_found_the_end_and_closes_its_source(fake_time):
    clock = stall.Clock()
    closed = []

    def source():
        try:
            for record in range(3):
                fake_time.advance(0.2)
                yield record
            fake_time.advance(0.5)  # the end came after a wait (the last items of other workers)
        finally:
            closed.append(True)

    for _record in stall.timed(source(), stall.Meter(lambda: clock)):
        fake_time.advance(0.1)
    assert clock.reading() == (pytest.approx(1.1), pytest.approx(0.3))
    assert closed

    # Closed early (the loop broke off): the source is closed too, and what
    # the loop did after its last record is not counted.
    closed.clear()
    clock = stall.Clock()
    records = stall.timed(source(), stall.Meter(lambda: clock))
    next(records)
    fake_time.advance(30)
    records.close()
    assert closed
    assert clock.reading() == (pytest.approx(0.2), 0.0)


def test_a_lease_body_counts_as_work_and_a_loop_that_got_nothing_counts_nothing(fake_time):
    clock = stall.Clock()
    meter = stall.Meter(lambda: clock)
    meter.wait()
    fake_time.advance(0.3)
    meter.got()
    fake_time.advance(0.7)
    meter.stop(worked=True)
    assert clock.reading() == (pytest.approx(0.3), pytest.approx(0.7))

    def no_clock():
        raise AssertionError("a loop that never got anything must not ask for its clock (it may have no leaser)")

    idle = stall.Meter(no_clock)
    idle.wait()
    fake_time.advance(5)
    idle.stop()


def test_a_meter_adds_to_its_clock_twice_a_second_not_per_record(fake_time):
    clock = stall.Clock()
    meter = stall.Meter(lambda: clock)
    meter.wait()
    fake_time.advance(0.1)
    meter.got()  # the first record: added at once (the meter asks for its clock then)
    assert clock.reading() == (pytest.approx(0.1), 0.0)
    fake_time.advance(0.1)
    meter.wait()
    fake_time.advance(0.1)
    meter.got()
    assert clock.reading() == (pytest.approx(0.1), 0.0)  # kept by the meter: no lock per record
    fake_time.advance(0.1)
    meter.wait()
    fake_time.advance(stall.FLUSH_EVERY)
    meter.got()
    assert clock.reading() == (pytest.approx(0.2 + stall.FLUSH_EVERY), pytest.approx(0.2))


def _child_reads(clock, before, after, answer):
    before.wait(10)
    answer.put(clock.reading())
    after.set()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_shared_clock_is_read_by_the_processes_started_after_it(method):
    context = multiprocessing.get_context(method)
    clock = stall.clock(JOB, f"main-{method}").shared()
    clock.add(1.0, 1.0)
    before, after, answer = context.Event(), context.Event(), context.Queue()
    child = context.Process(target=_child_reads, args=(clock, before, after, answer))
    child.start()
    clock.add(2.0, 3.0)  # after the child started: it reads the same memory
    before.set()
    assert answer.get(timeout=60) == (3.0, 4.0)
    child.join(60)
    assert child.exitcode == 0


def _forked_registry(answer):
    answer.put((stall.Report(JOB + 1, "main").due(), stall.clock(JOB + 1, "main").id))


def test_a_forked_child_starts_with_none_of_its_parents_clocks():
    context = multiprocessing.get_context("fork")
    parent = stall.clock(JOB + 1, "main")
    parent.add(1.0, 2.0)
    answer = context.Queue()
    child = context.Process(target=_forked_registry, args=(answer,))
    child.start()
    sent, child_clock = answer.get(timeout=60)
    child.join(60)
    assert sent is None  # nothing of its own measured yet: its heartbeats send no stall
    assert child_clock != parent.id


def test_a_heartbeat_sends_the_clock_when_it_moved_and_paces_itself_while_a_loop_is_measured():
    report = stall.Report(JOB + 2, "nobody-measures-this")
    assert report.due() is None
    assert report.pace(20.0) == stall.FIRST_REPORT  # the first: the loop's clock comes with its first record
    assert report.pace(20.0) == 20.0  # no loop of this process is measured on this job
    clock = stall.clock(JOB + 2, "nobody-measures-this")
    assert report.pace(20.0) == stall.REPORT_EVERY
    assert report.pace(1.0) == 1.0
    clock.add(0.5, 1.5)
    body = report.due()
    assert body == {"clock": clock.id, "waited": 0.5, "busy": 1.5}
    report.sent(body)
    assert report.due() is None
    clock.add(0.0, 1.0)
    assert report.due() == {"clock": clock.id, "waited": 0.5, "busy": 2.5}
    # Another process's clock of the same loop (its loaders adopt it) is what its heartbeats send.
    main = stall.Clock()
    stall.adopt(JOB + 2, "nobody-measures-this", main)
    main.add(1.0, 1.0)
    assert report.due() == {"clock": main.id, "waited": 1.0, "busy": 1.0}
