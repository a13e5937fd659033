"""A finished job's timeline spans its leases, not a window that runs long past them.

Found: the activity of a finished job drawn in 2% of the timeline's width.
"""

from datetime import datetime, timedelta, timezone

from dashboard.presenters import TIMELINE_LEFT, TIMELINE_WIDTH, timeline_chart

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def lease(worker, start, stop):
    return {
        "id": start,
        "item": f"/{start}",
        "worker": worker,
        "state": "done",
        "leased_at": T0 + timedelta(seconds=start),
        "completed_at": T0 + timedelta(seconds=stop),
    }


def test_the_bars_of_a_finished_job_fill_the_width():
    data = {
        "start": T0 - timedelta(minutes=29),
        "end": T0 + timedelta(minutes=1),
        "now": T0 + timedelta(hours=2),
        "leases": [lease("w0", 0, 20), lease("w1", 10, 36)],
        "truncated": False,
    }
    chart = timeline_chart(data, ended=True)
    assert chart["start"] == T0 and chart["end"] == T0 + timedelta(seconds=36)
    first, last = chart["rows"][0]["bars"][0], chart["rows"][1]["bars"][0]
    assert first["x"] == TIMELINE_LEFT and last["x"] + last["width"] == TIMELINE_WIDTH - 4
    # A running job keeps its window to now: idle lanes at the right are the tail.
    assert timeline_chart(data)["end"] == data["end"]
