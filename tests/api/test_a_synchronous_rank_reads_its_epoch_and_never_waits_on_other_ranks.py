"""Takes of synchronous training (upto_epoch, sync) and the records an epoch holds, through the API."""

import pytest

from server.models import Job

from .helpers import create_job

pytestmark = pytest.mark.django_db


def take(client, job_id, worker, **fields):
    response = client.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": worker, **fields}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_take_up_to_an_epoch_leases_nothing_of_later_epochs(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], num_epochs=3, shuffle=False)
    first = take(worker_client, job["id"], "r0", count=5, upto_epoch=0)
    assert [(lease["item"], lease["epoch"]) for lease in first["leases"]] == [("/a", 0), ("/b", 0)]
    done = [{"id": lease["id"], "token": lease["token"]} for lease in first["leases"]]
    end = take(worker_client, job["id"], "r0", complete=done, upto_epoch=0, sync=True)
    assert (end["leases"], end["exhausted"], end["waiting_on"]) == ([], False, 0)  # this epoch's end, not the job's
    later = take(worker_client, job["id"], "r0", count=5, upto_epoch=1)
    assert [lease["epoch"] for lease in later["leases"]] == [1, 1]


def test_what_an_earlier_epoch_left_is_read_first(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"], num_epochs=2, shuffle=False)
    held = take(worker_client, job["id"], "r0", count=2, upto_epoch=0)["leases"]
    given_back = held[1]
    assert (
        worker_client.post(
            f"/api/v1/leases/{given_back['id']}/fail/",
            {"token": given_back["token"], "error": "epoch stopped"},
            format="json",
        ).status_code
        == 200
    )
    next_epoch = take(worker_client, job["id"], "r1", count=3, upto_epoch=1)["leases"]
    assert [(lease["item"], lease["epoch"]) for lease in next_epoch] == [("/b", 0), ("/a", 1), ("/b", 1)]


def test_a_synchronous_rank_does_not_wait_for_other_ranks_leases(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"], num_epochs=1)
    take(worker_client, job["id"], "rank0", upto_epoch=0, sync=True)
    # Another rank of an asynchronous job would wait for rank0's lease to end;
    # a synchronous rank cannot: rank0 finishes it only if this rank trains on.
    waiting = take(worker_client, job["id"], "rank1", upto_epoch=0)
    assert (waiting["waiting_on"], waiting["leased_by_others"]) == (1, 1)
    ended = take(worker_client, job["id"], "rank1", upto_epoch=0, sync=True)
    assert (ended["leases"], ended["exhausted"], ended["waiting_on"], ended["leased_by_others"]) == ([], False, 0, 1)


def test_the_last_epochs_end_is_the_jobs_end(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"], num_epochs=2)
    for epoch in (0, 1):
        lease = take(worker_client, job["id"], "r0", upto_epoch=epoch, sync=True)["leases"][0]
        done = [{"id": lease["id"], "token": lease["token"]}]
        answer = take(worker_client, job["id"], "r0", complete=done, upto_epoch=epoch, sync=True)
        assert answer["exhausted"] is (epoch == 1)


@pytest.mark.parametrize("field, value", [("upto_epoch", -1), ("upto_epoch", "1"), ("upto_epoch", 1.5), ("sync", 1)])
def test_bad_synchronous_fields_are_refused(worker_client, job_name, field, value):
    job = create_job(worker_client, job_name, ["/a"])
    response = worker_client.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "r", field: value}, format="json")
    assert response.status_code == 400 and field in response.json()["fields"]


def test_the_records_of_an_epoch_and_what_is_unread_up_to_one(worker_client, job_name):
    works = ["/f.csv?start=0&end=100", "/g.csv?start=0&end=50"]
    job = create_job(worker_client, job_name, works, num_epochs=3, shuffle=False)
    records = worker_client.get(f"/api/v1/jobs/{job['id']}/records/?upto_epoch=1").json()
    # Epoch 1 not made yet: counted from units.
    assert records == {
        "upto_epoch": 1,
        "slicing": False,
        "per_epoch": 150,
        "unread": 300,
        "leased": 0,
        "epochs_made": 1,
    }
    lease = take(worker_client, job["id"], "r0", upto_epoch=0)["leases"][0]
    take(worker_client, job["id"], "r0", complete=[{"id": lease["id"], "token": lease["token"]}], upto_epoch=0)
    # The second take leased the other unit: its 50 records are unread, and leased.
    after = worker_client.get(f"/api/v1/jobs/{job['id']}/records/?upto_epoch=0").json()
    assert (after["unread"], after["leased"], after["epochs_made"]) == (50, 50, 2)  # epoch 1 made as 0 ran out
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/records/?upto_epoch=1").json()["leased"] == 50
    whole = create_job(worker_client, f"{job_name}-whole", ["/a", "/b"])
    unknown = worker_client.get(f"/api/v1/jobs/{whole['id']}/records/?upto_epoch=0").json()
    assert unknown["per_epoch"] is None and unknown["unread"] is None and unknown["leased"] is None
    bad = worker_client.get(f"/api/v1/jobs/{job['id']}/records/?upto_epoch=x")
    assert bad.status_code == 400


@pytest.mark.parametrize(
    "state, resume_state, slicing",
    [("slicing", "", True), ("paused", "slicing", True), ("paused", "running", False), ("running", "", False)],
)
def test_the_records_answer_says_whether_the_job_is_still_being_sliced(
    worker_client, job_name, state, resume_state, slicing
):
    # A synchronous rank plans its epoch from this one answer: while slicing
    # (paused while slicing too) its counts are not final, and it asks again.
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=100"])
    Job.objects.filter(pk=job["id"]).update(state=state, resume_state=resume_state)
    records = worker_client.get(f"/api/v1/jobs/{job['id']}/records/?upto_epoch=0").json()
    assert records["slicing"] is slicing


def test_a_take_for_at_most_some_records_leaves_the_rest_of_a_range_pending(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=100"], shuffle=False)
    first = take(worker_client, job["id"], "r0", max_records=30, tracks=True, sync=True)["leases"][0]
    assert (first["start"], first["end"], first["item"]) == (0, 30, "/f.csv?start=0&end=30")
    rest = take(worker_client, job["id"], "r1", sync=True)["leases"][0]
    assert (rest["start"], rest["end"]) == (30, 100)
    # A whole item, or a range no longer than asked, is leased as it is.
    short = create_job(worker_client, f"{job_name}-short", ["/g.csv?start=0&end=10", "/h"], shuffle=False)
    leases = [take(worker_client, short["id"], "r0", max_records=30)["leases"][0] for _ in range(2)]
    assert [(lease["start"], lease["end"]) for lease in leases] == [(0, 10), (None, None)]


def test_a_take_of_several_leases_holds_at_most_its_records_in_all(worker_client, job_name):
    from server.models import Event, Item

    works = [f"/p{i}.csv?start=0&end=10" for i in range(5)]
    job = create_job(worker_client, job_name, works, shuffle=False, max_attempts=1)
    # 25 records in three leases of up to 10: two whole, the third cut at 5;
    # the fourth was leased past the bound and went back in the same take.
    answer = take(worker_client, job["id"], "r0", count=4, max_records=25, tracks=True, sync=True)
    leases = [(lease["item"], lease["start"], lease["end"]) for lease in answer["leases"]]
    assert leases == [
        ("/p0.csv?start=0&end=10", 0, 10),
        ("/p1.csv?start=0&end=10", 0, 10),
        ("/p2.csv?start=0&end=5", 0, 5),
    ]
    rows = Item.objects.filter(job_id=job["id"]).order_by("position", "range_start")
    states = [(row.state, row.attempts) for row in rows if row.state != "leased"]
    # The rest of /p2, /p3 (given back with its attempt) and /p4: pending, none used an attempt.
    assert sorted(states) == [("pending", 0)] * 3
    given_back = Event.objects.filter(job_id=job["id"], kind="released").values_list("message", flat=True)
    assert list(given_back) == ["leased past the take's max_records, given back in the same take"]
    # Everything is read, each record once.
    rest = []
    for worker in ("r1", "r1", "r1"):
        rest += [
            (lease["item"], lease["start"], lease["end"])
            for lease in take(worker_client, job["id"], worker, sync=True)["leases"]
        ]
    assert sorted(rest) == sorted(
        [("/p2.csv?start=5&end=10", 5, 10), ("/p3.csv?start=0&end=10", 0, 10), ("/p4.csv?start=0&end=10", 0, 10)]
    )


def test_a_synchronous_take_asks_no_split_of_other_ranks(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/f.csv?start=0&end=1000"])
    held = take(worker_client, job["id"], "r0", tracks=True, sync=True)["leases"][0]
    assert take(worker_client, job["id"], "r1", sync=True)["waiting_on"] == 0
    beat = worker_client.post(
        "/api/v1/leases/extend/", {"leases": [{"id": held["id"], "token": held["token"], "position": 5}]}, format="json"
    ).json()
    assert beat["splits"] == {}  # its records are its rank's quota: taking them would leave it short


def test_a_released_item_goes_back_unread_without_using_an_attempt(worker_client, job_name):
    from server.models import Event, Item

    job = create_job(worker_client, job_name, ["/a"], max_attempts=1)
    for _ in range(3):  # more releases than attempts: a released item never fails for it
        lease = take(worker_client, job["id"], "r0", sync=True)["leases"][0]
        answer = worker_client.post(
            f"/api/v1/leases/{lease['id']}/release/",
            {"token": lease["token"], "reason": "epoch 0 stopped"},
            format="json",
        )
        assert answer.status_code == 200 and answer.json() == {"id": lease["id"], "state": "pending"}
    item = Item.objects.get(id=lease["id"])
    assert (item.state, item.attempts) == ("pending", 0)
    assert Event.objects.filter(item_id=item.id, kind="released", message="epoch 0 stopped").count() == 3
    again = worker_client.post(f"/api/v1/leases/{lease['id']}/release/", {"token": lease["token"]}, format="json")
    assert again.status_code == 409 and again.json()["error"] == "lease_lost"  # released already: nothing twice
