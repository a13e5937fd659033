"""The liquid tail through the API: an idle worker's take asks for a split, the holder answers, the rest is an item.

Works given as slices (``path?start=S&end=E``) are record ranges without a
slicing run, so these tests need no files. Paces are set on the rows (the
holder's lease began so long ago), never slept for.
"""

import pytest
from django.db import connection

from .helpers import complete, create_job, take

pytestmark = pytest.mark.django_db


def extend(client, lease, position=None, token=None):
    ref = {"id": lease["id"], "token": token or lease["token"]}
    if position is not None:
        ref["position"] = position
    response = client.post("/api/v1/leases/extend/", {"leases": [ref]}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def split(client, lease, at, token=None):
    return client.post(
        f"/api/v1/leases/{lease['id']}/split/", {"token": token or lease["token"], "at": at}, format="json"
    )


def began_seconds_ago(lease_id, seconds):
    """The lease began ``seconds`` ago and its last position report is now: its pace is read_to / seconds."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE shardline_item SET leased_at = now() - make_interval(secs => %s), read_at = now() WHERE id = %s",
            [seconds, lease_id],
        )


def item_rows(job_id):
    with connection.cursor() as cursor:
        cursor.execute(
            'SELECT id, state, coalesce(range_start, u.start), coalesce(range_end, u."end"), parent_id, i.position '
            "FROM shardline_item AS i JOIN shardline_unit AS u ON u.job_id = i.job_id AND u.idx = i.unit_idx "
            "WHERE i.job_id = %s ORDER BY i.position",
            [job_id],
        )
        return cursor.fetchall()


def events(job_id, kind):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT item_id, worker, message FROM shardline_event WHERE job_id = %s AND kind = %s ORDER BY id",
            [job_id, kind],
        )
        return cursor.fetchall()


def test_the_rest_of_a_range_becomes_an_item_that_the_idle_worker_leases(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/f.csv?start=0&end=1000"])
    held = take(worker_client, job["id"], "holder")["leases"][0]
    assert (held["start"], held["end"], held["item"]) == (0, 1000, "/data/f.csv?start=0&end=1000")
    assert extend(worker_client, held, position=100)["splits"] == {}
    began_seconds_ago(held["id"], 10)  # 10 records a second

    idle = take(worker_client, job["id"], "idle")
    assert (idle["leases"], idle["exhausted"]) == ([], False)
    assert idle["waiting_on"] >= 1 and idle["retry_after"] <= 0.5  # a split is coming: wait, briefly

    beat = extend(worker_client, held, position=104)
    at = beat["splits"][str(held["id"])]
    assert 104 < at < 1000 and beat["heartbeat_in"] <= 0.5
    answer = split(worker_client, held, at)
    assert answer.status_code == 200, answer.content
    assert answer.json()["split"] and (answer.json()["start"], answer.json()["end"]) == (0, at)

    remainder = take(worker_client, job["id"], "idle")["leases"][0]
    assert remainder["id"] == answer.json()["remainder"]
    assert (remainder["start"], remainder["end"], remainder["epoch"]) == (at, 1000, 0)
    assert remainder["item"] == f"/data/f.csv?start={at}&end=1000"
    assert extend(worker_client, held)["splits"] == {}  # answered: asked no more

    assert complete(worker_client, held).status_code == 200
    assert complete(worker_client, remainder).status_code == 200
    assert take(worker_client, job["id"], "idle")["exhausted"]
    rows = item_rows(job["id"])
    assert [(state, first, stop, parent) for _id, state, first, stop, parent, _pos in rows] == [
        ("done", 0, at, None),
        ("done", at, 1000, held["id"]),
    ]
    assert events(job["id"], "split") == [
        (
            held["id"],
            "holder",
            f"split at record {at}: holder keeps records [0, {at}); records [{at}, 1000) became pending item "
            f"#{remainder['id']}, asked for by idle worker idle",
        )
    ]
    assert [(item, worker) for item, worker, _message in events(job["id"], "remainder")] == [(remainder["id"], "idle")]


def test_the_split_point_lets_every_worker_finish_together(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=10000", "/g.csv?start=0&end=10000"], shuffle=False)
    slow = take(worker_client, job["id"], "slow")["leases"][0]
    fast = take(worker_client, job["id"], "fast")["leases"][0]
    extend(worker_client, slow, position=1000)
    extend(worker_client, fast, position=3000)
    began_seconds_ago(slow["id"], 10)  # 100 records/s, 9,000 left: 90 s
    began_seconds_ago(fast["id"], 1)  # 3,000 records/s, 7,000 left: 2.3 s
    take(worker_client, job["id"], "idle")
    asked = extend(worker_client, slow)["splits"]
    assert list(asked) == [str(slow["id"])]  # the lease that would finish last
    # Three workers share about 16,000 unread records at 100 + 3,000 + 1,550
    # (the idle one at the mean pace) records/s: all done in about 3.4 s if
    # the slow holder keeps what it reads by then, 340 records. Sharing with
    # the one taker alone, it would have kept 9,000 * 100 / 1,650 = 545.
    at = asked[str(slow["id"])]
    assert 1000 + 320 < at < 1000 + 360


def test_the_rest_is_cut_into_a_piece_for_each_idle_worker(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=10000"])
    held = take(worker_client, job["id"], "holder")["leases"][0]
    for idle in ("idle-1", "idle-2", "idle-3", "idle-4"):  # seen by the server; nothing to split yet
        assert take(worker_client, job["id"], idle)["leases"] == []
    extend(worker_client, held, position=1000)
    began_seconds_ago(held["id"], 10)  # 100 records/s, 9,000 left

    take(worker_client, job["id"], "idle-1")
    at = extend(worker_client, held)["splits"][str(held["id"])]
    # Five workers at 100 records/s share 9,000 records: 18 s each. The holder
    # keeps what it reads in 18 s, the other four get a piece each.
    assert 1000 + 1750 < at < 1000 + 1850
    answer = split(worker_client, held, at).json()
    assert answer["split"] and answer["end"] == at

    pieces = [take(worker_client, job["id"], idle)["leases"] for idle in ("idle-1", "idle-2", "idle-3", "idle-4")]
    assert all(len(leases) == 1 for leases in pieces)
    ranges = [(leases[0]["start"], leases[0]["end"]) for leases in pieces]
    assert [lease[0]["id"] for lease in pieces][0] == answer["remainder"]
    # In record order, end to end, from the cut to the old end, about equal.
    assert [first for first, _stop in ranges] == sorted(first for first, _stop in ranges)
    assert ranges[0][0] == at and ranges[-1][1] == 10000
    assert all(stop == next_first for (_f, stop), (next_first, _s) in zip(ranges, ranges[1:]))
    assert max(stop - first for first, stop in ranges) - min(stop - first for first, stop in ranges) <= 1
    assert take(worker_client, job["id"], "idle-5")["leases"] == []  # nothing more was made
    rows = item_rows(job["id"])
    assert [(first, stop, parent) for _id, _state, first, stop, parent, _pos in rows] == [
        (0, at, None),
        *((first, stop, held["id"]) for first, stop in ranges),
    ]
    assert [pos for *_rest, pos in rows] == [0, 1, 2, 3, 4]
    (message,) = [message for _item, _worker, message in events(job["id"], "split")]
    assert message == (
        f"split at record {at}: holder keeps records [0, {at}); records [{at}, 10000) became pending 4 items, "
        f"#{pieces[0][0]['id']} to #{pieces[-1][0]['id']}, asked for by idle worker idle-1"
    )
    assert len(events(job["id"], "remainder")) == 4


def test_a_holder_past_the_point_cuts_where_it_is(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=1000"])
    held = take(worker_client, job["id"], "holder")["leases"][0]
    extend(worker_client, held, position=100)
    take(worker_client, job["id"], "idle")
    at = extend(worker_client, held, position=100)["splits"][str(held["id"])]
    assert at < 700
    answer = split(worker_client, held, 700).json()  # it had read up to 700 meanwhile
    assert (answer["end"], answer["split"]) == (700, True)
    assert take(worker_client, job["id"], "idle")["leases"][0]["start"] == 700


def test_a_refusal_cuts_nothing_and_clears_the_request(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=1000"])
    held = take(worker_client, job["id"], "holder")["leases"][0]
    extend(worker_client, held, position=10)
    take(worker_client, job["id"], "idle")
    assert extend(worker_client, held)["splits"]
    answer = split(worker_client, held, 1000).json()
    assert (answer["split"], answer["end"], answer["remainder"]) == (False, 1000, None)
    assert extend(worker_client, held)["splits"] == {}
    assert len(item_rows(job["id"])) == 1 and events(job["id"], "split") == []


def test_a_repeated_answer_makes_one_remainder(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=1000"])
    held = take(worker_client, job["id"], "holder")["leases"][0]
    first = split(worker_client, held, 400).json()
    again = split(worker_client, held, 400).json()
    assert first == again and first["split"]
    assert len(item_rows(job["id"])) == 2
    # A second cut, further in, splits the lease again (splits nest).
    nested = split(worker_client, held, 200).json()
    assert nested["split"] and nested["remainder"] != first["remainder"]
    assert [(first_, stop) for _id, _s, first_, stop, _p, _pos in item_rows(job["id"])] == [
        (0, 200),
        (400, 1000),
        (200, 400),
    ]


def test_bad_answers_are_refused_and_change_nothing(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=1000", "/whole.csv"], shuffle=False)
    held, whole = take(worker_client, job["id"], "holder", count=2)["leases"]
    extend(worker_client, held, position=300)
    before = item_rows(job["id"])
    below = split(worker_client, held, 200)  # records it said it has read
    # Refused by the lease's state (409), not as malformed input: the same point is valid elsewhere.
    assert below.status_code == 409 and "position its holder reported" in below.json()["message"]
    assert split(worker_client, held, 0).status_code == 409
    assert split(worker_client, held, 500, token=held["token"] + 1000).status_code == 409
    not_a_range = split(worker_client, whole, 5)
    assert not_a_range.status_code == 409 and "not a record range" in not_a_range.json()["message"]
    assert split(worker_client, held, -1).status_code == 400
    assert item_rows(job["id"]) == before


def test_nothing_is_asked_below_the_floor_or_with_splitting_off(worker_client, job_name, settings):
    settings.SHARDLINE_SPLIT_MIN_RECORDS = 100
    small = create_job(worker_client, job_name, ["/f.csv?start=0&end=250"])
    held = take(worker_client, small["id"], "holder")["leases"][0]
    extend(worker_client, held, position=60)  # 190 left: under twice the floor
    idle = take(worker_client, small["id"], "idle")
    assert idle["retry_after"] > 0.25 or idle["waiting_on"] is not None
    assert extend(worker_client, held)["splits"] == {}

    off = create_job(worker_client, job_name + "-off", ["/f.csv?start=0&end=100000"], split_tail=False)
    assert off["split_tail"] is False
    held = take(worker_client, off["id"], "holder")["leases"][0]
    extend(worker_client, held, position=1)
    take(worker_client, off["id"], "idle")
    beat = extend(worker_client, held)
    assert beat["splits"] == {} and beat["heartbeat_in"] == 2.0  # a range, but no tail to split


def test_an_idle_workers_pace_is_that_of_the_range_it_finished(worker_client, job_name):
    # The tail begins as the fast workers finish. The one that finished its
    # 1,000 records in a second asks; the holder reads 10 records a second
    # with 900 left. Together they read 1,010 a second: all done in 0.9 s
    # if the holder keeps about 9 records. Paced by the held lease alone
    # (the holder's 10 a second, for both), it would keep 450.
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=1000", "/g.csv?start=0&end=1000"], shuffle=False)
    held = take(worker_client, job["id"], "holder")["leases"][0]
    fast = take(worker_client, job["id"], "fast")["leases"][0]
    assert (held["item"], fast["item"]) == ("/f.csv?start=0&end=1000", "/g.csv?start=0&end=1000")
    complete(worker_client, fast)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE shardline_item SET leased_at = completed_at - interval '1 second' WHERE id = %s", [fast["id"]]
        )
    extend(worker_client, held, position=100)
    began_seconds_ago(held["id"], 10)

    take(worker_client, job["id"], "fast")
    at = extend(worker_client, held)["splits"][str(held["id"])]
    assert 100 < at < 120, at


def test_a_slow_holder_is_asked_for_fewer_records_than_the_floor(worker_client, job_name, settings):
    # 40 records left, under twice the floor of 100: a fast holder reads
    # them in a moment and is not asked (the test above); one that reads a
    # record a second would read on for 40 s after the idle worker is done.
    # Its floor is what it reads in splits.PIECE_SECONDS (services/splits.py).
    settings.SHARDLINE_SPLIT_MIN_RECORDS = 100
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=100"])
    held = take(worker_client, job["id"], "holder")["leases"][0]
    extend(worker_client, held, position=60)
    began_seconds_ago(held["id"], 60)  # a record a second
    idle = take(worker_client, job["id"], "idle")
    assert idle["waiting_on"] >= 1 and idle["retry_after"] <= 0.5  # a split is coming
    beat = extend(worker_client, held, position=60)
    at = beat["splits"][str(held["id"])]
    assert 60 < at < 100, at
    answer = split(worker_client, held, at)
    assert answer.status_code == 200 and answer.json()["split"], answer.content
    remainder = take(worker_client, job["id"], "idle")["leases"][0]
    assert (remainder["start"], remainder["end"]) == (at, 100)


def test_the_item_history_says_where_a_split_cut_and_where_the_rest_went(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/f.csv?start=0&end=1000"])
    held = take(worker_client, job["id"], "holder")["leases"][0]
    remainder = split(worker_client, held, 600).json()["remainder"]
    cut = worker_client.get(f"/api/v1/jobs/{job['id']}/items/{held['id']}/history/").json()
    rest = worker_client.get(f"/api/v1/jobs/{job['id']}/items/{remainder}/history/").json()
    assert (cut["item"], cut["start"], cut["end"], cut["parent"]) == ("/data/f.csv?start=0&end=600", 0, 600, None)
    assert [(e["kind"], e["worker"]) for e in cut["splits"]] == [("split", "holder")]
    assert f"became pending item #{remainder}" in cut["splits"][0]["message"]
    assert (rest["item"], rest["start"], rest["end"], rest["parent"]) == (
        "/data/f.csv?start=600&end=1000",
        600,
        1000,
        held["id"],
    )
    assert [e["kind"] for e in rest["splits"]] == ["remainder"]
    assert f"made from item {held['id']}" in rest["splits"][0]["message"]


def test_a_tracking_take_can_be_split_before_its_holder_reports(worker_client, job_name):
    # The SDK's readers take with "tracks": the lease starts at its first
    # record, so an idle worker need not wait for the holder's first report.
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=1000"])
    response = worker_client.post(
        f"/api/v1/jobs/{job['id']}/leases/", {"worker": "holder", "tracks": True}, format="json"
    )
    held = response.json()["leases"][0]
    take(worker_client, job["id"], "idle")
    assert extend(worker_client, held)["splits"] == {str(held["id"]): 500}  # no pace yet: half of it


def test_a_heartbeat_brings_the_splits_asked_of_the_holders_other_leases(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=1000", "/g.csv?start=0&end=5000"], shuffle=False)
    first, second = worker_client.post(
        f"/api/v1/jobs/{job['id']}/leases/", {"worker": "holder", "count": 2, "tracks": True}, format="json"
    ).json()["leases"]
    take(worker_client, job["id"], "idle")  # asks the one with the most to read: /g
    beat = extend(worker_client, first)  # a heartbeat that left before /g was leased
    assert beat["splits"] == {str(second["id"]): 2500}
    assert list(beat["extended"]) == [str(first["id"])]


def test_no_split_is_asked_of_a_lease_of_the_takers_own_consumer(worker_client, job_name):
    # Two loader processes of one DataLoader read for one consumer. The idle
    # one waited for its sibling's split for good: the DataLoader asks the
    # sibling for more only once the idle one returns, and the sibling's
    # answer (where it read to) left too little to cut.
    job = create_job(worker_client, job_name, ["/data/f.csv?start=0&end=1000"])

    def loader_take(name):
        body = {"worker": name, "consumer": "rank0", "count": 1, "complete": [], "tracks": True}
        response = worker_client.post(f"/api/v1/jobs/{job['id']}/leases/", body, format="json")
        assert response.status_code == 200, response.content
        return response.json()

    held = loader_take("rank0:loader0")["leases"][0]
    assert extend(worker_client, held, position=100)["splits"] == {}
    began_seconds_ago(held["id"], 10)

    idle = loader_take("rank0:loader1")
    assert (idle["leases"], idle["exhausted"], idle["waiting_on"]) == ([], False, 0)  # its own consumer reads it
    assert extend(worker_client, held, position=104)["splits"] == {}

    other = take(worker_client, job["id"], "another-process")  # another consumer: it asks, and waits
    assert other["waiting_on"] >= 1
    assert str(held["id"]) in extend(worker_client, held, position=108)["splits"]


def test_a_holder_that_reported_no_progress_is_judged_at_the_mean_pace(worker_client, job_name):
    # Its one report came as it began (its position the range's first
    # record); held heartbeats keep the next for seconds. A pace of 0 put
    # its lease last in line, and a slow holder kept half its range.
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=10000", "/g.csv?start=0&end=10000"], shuffle=False)
    quiet = take(worker_client, job["id"], "quiet")["leases"][0]
    fast = take(worker_client, job["id"], "fast")["leases"][0]
    extend(worker_client, quiet, position=0)
    extend(worker_client, fast, position=3000)
    began_seconds_ago(quiet["id"], 1)  # nothing read yet: 10,000 left, about 3.3 s at the mean pace
    began_seconds_ago(fast["id"], 1)  # 3,000 records/s, 7,000 left: 2.3 s
    take(worker_client, job["id"], "idle")
    assert list(extend(worker_client, quiet)["splits"]) == [str(quiet["id"])]


def last_round(client, job_name, read_at, leased_at):
    """Worker "near" read 100 records a second on its first range and holds 120 more; "fresh" has just begun 100.

    Neither has reported on its range since it began; "near"'s last report
    (as it took it) and its start are ``read_at`` and ``leased_at`` seconds ago.
    """
    job = create_job(
        client, job_name, ["/a.csv?start=0&end=100", "/b.csv?start=0&end=120", "/c.csv?start=0&end=100"], shuffle=False
    )
    first = take(client, job["id"], "near")["leases"][0]
    began_seconds_ago(first["id"], 1)
    assert complete(client, first, records=100).status_code == 200  # 100 records in 1 s
    near = take(client, job["id"], "near")["leases"][0]
    fresh = take(client, job["id"], "fresh")["leases"][0]
    assert (near["item"], fresh["item"]) == ("/b.csv?start=0&end=120", "/c.csv?start=0&end=100")
    extend(client, near, position=0)  # its report as it began
    extend(client, fresh, position=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE shardline_item SET read_at = now() - make_interval(secs => %s),"
            " leased_at = now() - make_interval(secs => %s) WHERE id = %s",
            [read_at, leased_at, near["id"]],
        )
    asking = take(client, job["id"], "idle")
    assert asking["leases"] == [] and asking["waiting_on"] >= 1
    return near, fresh


def test_a_holder_not_heard_from_on_its_new_range_is_judged_by_its_pace_on_the_last(worker_client, job_name):
    # The job's last round: "near" began its 120-record range a second ago at
    # the 100 records a second of its range before, and has not reported
    # since (a held heartbeat keeps the next report). Judged as if it had
    # read nothing, its 120 looked the most unread: the idle worker asked
    # it, near its end, to refuse, while "fresh" read on alone.
    near, fresh = last_round(worker_client, job_name, read_at=1, leased_at=1)
    assert extend(worker_client, near)["splits"] == {}
    assert list(extend(worker_client, fresh)["splits"]) == [str(fresh["id"])]


def test_a_range_taken_ahead_is_judged_from_when_its_consumer_started_it(worker_client, job_name):
    # "near" took its range ahead five seconds ago and its loop started it a
    # tenth of a second ago (take.sql's `started`): it has read about 10 of
    # its 120. Counted from the take, it would look done, and the idle
    # worker would ask "fresh" instead.
    near, fresh = last_round(worker_client, job_name, read_at=5, leased_at=0.1)
    assert list(extend(worker_client, near)["splits"]) == [str(near["id"])]
    assert extend(worker_client, fresh)["splits"] == {}


def test_the_cut_makes_the_pieces_the_request_planned_however_few_records_each(worker_client, job_name, settings):
    # The plan sizes pieces by time (what a worker reads in the plan's
    # horizon), and the floor of a holder this slow is a record or two. The
    # cut counted the rest in pieces of the records floor instead: here 720
    # records in three pieces for four idle workers, one of them left idle.
    settings.SHARDLINE_SPLIT_MIN_RECORDS = 200
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=1000"])
    held = take(worker_client, job["id"], "holder")["leases"][0]
    for idle in ("idle-1", "idle-2", "idle-3", "idle-4"):  # seen by the server; nothing to split yet
        assert take(worker_client, job["id"], idle)["leases"] == []
    extend(worker_client, held, position=100)
    began_seconds_ago(held["id"], 10)  # 10 records/s, 900 left

    take(worker_client, job["id"], "idle-1")
    at = extend(worker_client, held)["splits"][str(held["id"])]
    # Five workers at 10 records/s share 900 records: 18 s, 180 records each.
    assert 100 + 170 < at < 100 + 190
    assert split(worker_client, held, at).json()["split"]
    pieces = [take(worker_client, job["id"], idle)["leases"] for idle in ("idle-1", "idle-2", "idle-3", "idle-4")]
    assert all(len(leases) == 1 for leases in pieces), pieces
    sizes = [leases[0]["end"] - leases[0]["start"] for leases in pieces]
    assert sum(sizes) == 1000 - at and max(sizes) - min(sizes) <= 1


def test_a_holder_past_the_point_asked_cuts_as_many_pieces_of_the_planned_size_as_are_left(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=1000"])
    held = take(worker_client, job["id"], "holder")["leases"][0]
    for idle in ("idle-1", "idle-2", "idle-3", "idle-4"):
        take(worker_client, job["id"], idle)
    extend(worker_client, held, position=100)
    began_seconds_ago(held["id"], 10)
    take(worker_client, job["id"], "idle-1")
    at = extend(worker_client, held)["splits"][str(held["id"])]
    piece = (1000 - at) // 4  # four planned, as in the test above
    # The holder read on past the point by two pieces' worth before it answered.
    answer = split(worker_client, held, at + 2 * piece).json()
    assert answer["split"] and answer["end"] == at + 2 * piece
    rests = [(first, stop) for _id, _state, first, stop, parent, _pos in item_rows(job["id"]) if parent == held["id"]]
    assert len(rests) == 2 and rests[0][0] == at + 2 * piece and rests[-1][1] == 1000


def test_a_lease_just_taken_is_split_by_the_pace_of_the_others(worker_client, job_name):
    # At the end of a job of many slices the last ones are leased as the
    # first workers run out, and the others' paces are known: a slice of 24
    # records at 40 records a second is 0.6 s of reading for its holder while
    # the worker beside it is idle. Its pace unknown, its floor was the 16
    # records of the records floor, and under twice that nothing was asked.
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=40", "/g.csv?start=0&end=24"], shuffle=False)
    done = take(worker_client, job["id"], "idle")["leases"][0]
    began_seconds_ago(done["id"], 1)
    assert complete(worker_client, done, records=40).status_code == 200  # 40 records in 1 s
    held = take(worker_client, job["id"], "holder")["leases"][0]
    assert (held["start"], held["end"]) == (0, 24)
    extend(worker_client, held, position=0)  # its report as it began: no pace yet

    asking = take(worker_client, job["id"], "idle")
    assert asking["leases"] == [] and asking["waiting_on"] >= 1
    at = extend(worker_client, held, position=0)["splits"][str(held["id"])]
    # Both at 40 records/s: each reads 12 of the 24.
    assert 10 <= at <= 14, at
    assert split(worker_client, held, at).json()["split"]
    rest = take(worker_client, job["id"], "idle")["leases"][0]
    assert (rest["start"], rest["end"]) == (at, 24)


def test_a_take_ahead_leases_no_piece_split_off_for_idle_workers(worker_client, job_name):
    # The pieces are sized for the workers with nothing to read. A worker
    # still reading that took one ahead started it only after its own item
    # (or gave it back to an idle worker, a round trip later).
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=1000", "/g.csv?start=0&end=100"], shuffle=False)
    held = take(worker_client, job["id"], "holder")["leases"][0]
    first = take(worker_client, job["id"], "busy")["leases"][0]
    began_seconds_ago(first["id"], 1)
    assert complete(worker_client, first).status_code == 200  # its pace known: a take ahead is not deferred for it
    split(worker_client, held, 500)
    ahead = worker_client.post(
        f"/api/v1/jobs/{job['id']}/leases/", {"worker": "busy", "count": 1, "ahead": True}, format="json"
    )
    assert ahead.status_code == 200 and ahead.json()["leases"] == [], ahead.content
    piece = take(worker_client, job["id"], "idle")["leases"]
    assert [(lease["start"], lease["end"]) for lease in piece] == [(500, 1000)]


def take_for(client, job_id, worker, consumer):
    response = client.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": worker, "consumer": consumer}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["leases"][0]


def test_one_idle_take_asks_every_lease_of_a_slow_process_that_would_finish_late(worker_client, job_name):
    # A plain DataLoader's loaders read in turn for one loop, each at half
    # its pace: asked one request apart, the last was left reading alone.
    works = [f"/{name}.csv?start=0&end=10000" for name in ("f", "g", "h", "i")]
    job = create_job(worker_client, job_name, works, shuffle=False)
    loaders = [take_for(worker_client, job["id"], f"slow:loader{n}:1", "slow") for n in range(2)]
    done_soon = take_for(worker_client, job["id"], "slow:loader2:1", "slow")
    fast = take_for(worker_client, job["id"], "fast", "fast")
    for lease in loaders:
        extend(worker_client, lease, position=500)
        began_seconds_ago(lease["id"], 10)  # 50 records/s, 9,500 left: 190 s
    extend(worker_client, done_soon, position=9000)
    began_seconds_ago(done_soon["id"], 10)  # 900 records/s, 1,000 left: done in about 1 s, before the plan's end
    extend(worker_client, fast, position=3000)
    began_seconds_ago(fast["id"], 1)  # 3,000 records/s, 7,000 left

    take(worker_client, job["id"], "idle")
    asked = {}
    for lease in [*loaders, done_soon, fast]:
        asked.update(extend(worker_client, lease)["splits"])
    assert sorted(asked) == sorted(str(lease["id"]) for lease in loaders)
    # Each at its own point: what its loader reads by the time all finish.
    for lease in loaders:
        assert 500 < asked[str(lease["id"])] < 1500


def test_a_request_asks_no_lease_of_another_user_that_names_the_same_consumer(worker_client, client_for, job_name):
    # The consumer is a name the client picks: leases are asked together only
    # under one holder, so a token cannot spread one request over others'.
    works = [f"/{name}.csv?start=0&end=10000" for name in ("f", "g", "h")]
    job = create_job(worker_client, job_name, works, shuffle=False)
    stranger = client_for("worker")
    mine = take_for(worker_client, job["id"], "slow:loader0:1", "slow")
    theirs = take_for(stranger, job["id"], "slow:loader1:2", "slow")
    fast = take_for(worker_client, job["id"], "fast", "fast")
    extend(worker_client, mine, position=400)
    began_seconds_ago(mine["id"], 10)  # 40 records/s: it would finish last
    extend(stranger, theirs, position=500)
    began_seconds_ago(theirs["id"], 10)  # 50 records/s: late too
    extend(worker_client, fast, position=3000)
    began_seconds_ago(fast["id"], 1)

    take(worker_client, job["id"], "idle")
    assert list(extend(worker_client, mine)["splits"]) == [str(mine["id"])]
    assert extend(stranger, theirs)["splits"] == {}
