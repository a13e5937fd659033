"""After a silence of the service (the database or every web process down), live leases keep the time they had left.

The clock row (server/clock.py, service_clock.sql) says when the service last
reached the database; times are set in the database instead of slept
through. Inside a test's transaction now() stands still, so "now() - 12 s"
is exactly twelve seconds before every statement of the test.
"""

import threading
import time

import pytest
from django.db import connection, connections, transaction

from server import clock, sql
from server.models import Event, Item

from ..api.helpers import create_job, take

pytestmark = pytest.mark.django_db


def silent_since(seconds: float) -> None:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE shardline_service_clock SET touched_at = now() - make_interval(secs => %s)", [seconds])


def set_expiry(item_id: int, seconds_from_now: float) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE shardline_item SET expires_at = now() + make_interval(secs => %s) WHERE id = %s",
            [seconds_from_now, item_id],
        )


def seconds_left(item_id: int) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM expires_at - now()) FROM shardline_item WHERE id = %s", [item_id])
        return float(cursor.fetchone()[0])


@pytest.fixture
def served(monkeypatch):
    """The middleware on, as under gunicorn, without this process's ticking thread; this process not touched yet."""
    monkeypatch.setenv("SHARDLINE_SERVICE_CLOCK", "1")
    monkeypatch.setattr(clock.clock, "keep_ticking", lambda: None)
    monkeypatch.setattr(clock.clock, "touched_at", None)


def three_leases(client, name):
    job = create_job(client, name, ["/a", "/b", "/c"], shuffle=False, lease_timeout=10)
    leases = take(client, job["id"], "holder", count=3)["leases"]
    return job["id"], {lease["item"]: lease["id"] for lease in leases}


def test_a_take_after_a_silence_reclaims_only_what_expired_before_it(served, worker_client, job_name):
    job_id, ids = three_leases(worker_client, job_name)
    silent_since(12)
    set_expiry(ids["/a"], -4)  # 8 s left when the service went silent: expired in the silence
    set_expiry(ids["/b"], -15)  # expired before the silence: its holder had stopped
    set_expiry(ids["/c"], 5)  # 17 s left then
    clock.clock.touched_at = None

    result = take(worker_client, job_id, "taker", count=3)

    assert [lease["item"] for lease in result["leases"]] == ["/b"]
    assert seconds_left(ids["/a"]) == pytest.approx(8)
    assert seconds_left(ids["/c"]) == pytest.approx(17)
    assert Item.objects.get(pk=ids["/a"]).worker == "holder"
    assert list(Event.objects.filter(job_id=job_id, kind="expired").values_list("item_id", flat=True)) == [ids["/b"]]


def test_a_silence_shorter_than_the_gap_gives_nothing_back(served, worker_client, job_name):
    job_id, ids = three_leases(worker_client, job_name)
    silent_since(clock.GAP * 0.75)
    set_expiry(ids["/a"], -1)
    clock.clock.touched_at = None

    result = take(worker_client, job_id, "taker")

    assert [lease["item"] for lease in result["leases"]] == ["/a"]
    assert seconds_left(ids["/b"]) == pytest.approx(10, abs=1)


def test_the_silence_is_given_back_once(worker_client, job_name):
    job_id, ids = three_leases(worker_client, job_name)
    silent_since(12)
    set_expiry(ids["/a"], -4)
    first = sql.run("service_clock", {"gap": clock.GAP})[0]
    again = sql.run("service_clock", {"gap": clock.GAP})[0]
    assert (first.shifted, float(first.silence)) == (3, pytest.approx(12))
    assert (again.shifted, again.silence) == (0, None)
    assert seconds_left(ids["/a"]) == pytest.approx(8)


def test_a_process_touches_again_a_tick_after_its_last_touch(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    process = clock.ServiceClock()
    assert process.due()
    process._touched(now[0], 0, None)
    now[0] += clock.TICK * 0.9
    assert not process.due()
    now[0] += clock.TICK * 0.1
    assert process.due()


def test_outside_a_server_process_the_middleware_is_off(monkeypatch):
    monkeypatch.delenv("SHARDLINE_SERVICE_CLOCK", raising=False)
    monkeypatch.delenv("SERVER_SOFTWARE", raising=False)
    assert not clock.serving()
    monkeypatch.setenv("SERVER_SOFTWARE", "gunicorn/23.0.0")
    assert clock.serving()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(30)
def test_of_two_processes_ending_one_outage_one_gives_it_back(worker_client, job_name):
    # Two web processes' first touches after an outage: the first holds the
    # clock row while it shifts; the second waits for it, then finds the
    # clock touched and shifts nothing, so no lease gets the silence twice.
    job_id, ids = three_leases(worker_client, job_name)
    before = seconds_left(ids["/a"])
    second_result = []

    def second_process():
        try:
            second_result.append(sql.run("service_clock", {"gap": clock.GAP})[0])
        finally:
            connections.close_all()

    with transaction.atomic():
        silent_since(12)  # the row is this transaction's from here: no server's touch comes between
        first = sql.run("service_clock", {"gap": clock.GAP})[0]
        second = threading.Thread(target=second_process)
        second.start()
        waiting = 0
        deadline = time.monotonic() + 10
        while not waiting and time.monotonic() < deadline:
            with connections["default"].cursor() as cursor:
                cursor.execute("SELECT pg_stat_clear_snapshot()")  # a fresh look, inside this transaction
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE '%shardline_service_clock%' AND pid <> pg_backend_pid()"
                )
                waiting = cursor.fetchone()[0]
        assert waiting, "the second touch never waited for the first"
    second.join(10)

    assert first.shifted == 3 and float(first.silence) == pytest.approx(12, abs=0.5)
    assert second_result[0].shifted == 0 and second_result[0].silence is None
    assert seconds_left(ids["/a"]) == pytest.approx(before + 12, abs=1)


def test_a_silence_is_a_warning_only_when_leases_were_live_through_it(caplog):
    # A service restarted after an idle spell was silent too, and gave
    # nothing back: a note, not a warning an operator must look into.
    with caplog.at_level("INFO", logger="shardline.clock"):
        clock.report_silence(33.3, 0)
        clock.report_silence(12.0, 3)
    assert [(r.levelname, r.getMessage(), r.count) for r in caplog.records] == [
        ("INFO", "the service was silent 33.3 s; no lease was live through it", 0),
        ("WARNING", "the service was silent 12.0 s; 3 live leases keep the time they had left", 3),
    ]
