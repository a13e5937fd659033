"""A heartbeat's data stall (worker_sdk.stall) is counted once, for the loop its leases are read for, and only with them.

The SDK sends each process's cumulative seconds (waited, and busy with
its own work) under its clock's id: the server adds what grew since that
clock's last report, so a repeat or a late heartbeat adds nothing, and a
new clock (a restarted process) adds all of its reading. The counts are
waited and total (waited + busy). A DataLoader's loaders hold the leases and report their main
process's loop (their consumer). Bad input is a 400 that changes nothing;
a stall sent with someone else's lease is counted nowhere.
"""

import re

import pytest

from server.models import DataStall, Item, Role

from .helpers import create_job, take

pytestmark = pytest.mark.django_db


def beat(client, leases, stall, **extra):
    refs = [{"id": lease["id"], "token": lease["token"]} for lease in leases]
    return client.post("/api/v1/leases/extend/", {"leases": refs, "stall": stall, **extra}, format="json")


def counted(job_id, worker):
    row = DataStall.objects.filter(job_id=job_id, worker=worker).first()
    return None if row is None else (row.waited, row.total)


def test_each_clock_adds_what_it_grew_and_a_repeat_or_a_late_report_adds_nothing(worker_client, job_name):
    job = create_job(worker_client, job_name)
    (lease,) = take(worker_client, job["id"], "host:1:0")["leases"]

    assert beat(worker_client, [lease], {"clock": "a1", "waited": 2.0, "busy": 3.0}).status_code == 200
    assert counted(job["id"], "host:1:0") == (2.0, 5.0)
    assert beat(worker_client, [lease], {"clock": "a1", "waited": 2.0, "busy": 3.0}).status_code == 200
    assert counted(job["id"], "host:1:0") == (2.0, 5.0)  # a repeat
    assert beat(worker_client, [lease], {"clock": "a1", "waited": 6.0, "busy": 4.0}).status_code == 200
    assert counted(job["id"], "host:1:0") == (6.0, 10.0)
    assert beat(worker_client, [lease], {"clock": "a1", "waited": 4.0, "busy": 4.0}).status_code == 200
    assert counted(job["id"], "host:1:0") == (6.0, 10.0)  # late: an earlier reading of the same clock
    # The process restarted under the same name: its new clock starts from zero.
    assert beat(worker_client, [lease], {"clock": "b2", "waited": 1.0, "busy": 2.0}).status_code == 200
    assert counted(job["id"], "host:1:0") == (7.0, 13.0)
    assert beat(worker_client, [lease], {"clock": "b2", "waited": 1.5, "busy": 2.5}).status_code == 200
    assert counted(job["id"], "host:1:0") == (7.5, 14.0)


def test_loaders_report_their_main_process_loop_and_two_of_them_count_its_clock_once(worker_client, job_name):
    job = create_job(worker_client, job_name)
    leases = []
    for loader in ("main:loader0:11", "main:loader1:12"):
        answer = worker_client.post(
            f"/api/v1/jobs/{job['id']}/leases/", {"worker": loader, "consumer": "main", "count": 1}, format="json"
        )
        assert answer.status_code == 200, answer.content
        leases += answer.json()["leases"]
    # Both loaders send the main process's shared clock, in any order.
    assert beat(worker_client, [leases[0]], {"clock": "m", "waited": 3.0, "busy": 1.0}).status_code == 200
    assert beat(worker_client, [leases[1]], {"clock": "m", "waited": 5.0, "busy": 2.0}).status_code == 200
    assert beat(worker_client, [leases[0]], {"clock": "m", "waited": 4.0, "busy": 2.0}).status_code == 200
    assert counted(job["id"], "main") == (5.0, 7.0)
    assert counted(job["id"], "main:loader0:11") is None and counted(job["id"], "main:loader1:12") is None


@pytest.mark.parametrize(
    "stall",
    [
        {"clock": "c", "waited": -1.0, "busy": 5.0},
        {"clock": "c", "waited": 1.0, "busy": -0.5},
        {"clock": "c", "waited": 1.0, "busy": 1e300},
        {"clock": "c", "waited": "1", "busy": 5.0},
        {"clock": "c", "waited": True, "busy": 5.0},
        {"clock": "c", "waited": 10**400, "busy": 5.0},
        {"clock": "", "waited": 1.0, "busy": 5.0},
        {"clock": "a" * 33, "waited": 1.0, "busy": 5.0},
        {"clock": "no spaces", "waited": 1.0, "busy": 5.0},
        {"clock": 7, "waited": 1.0, "busy": 5.0},
        {"clock": "c", "waited": 1.0},
        {"clock": "c", "waited": 1.0, "busy": 4.0, "total": 5.0},
        [1.0, 5.0],
        "1.0/5.0",
        None,  # omitted, not null
    ],
)
def test_a_bad_stall_is_a_400_and_changes_nothing(worker_client, job_name, stall):
    job = create_job(worker_client, job_name)
    (lease,) = take(worker_client, job["id"], "w")["leases"]
    expires = Item.objects.get(id=lease["id"]).expires_at
    answer = beat(worker_client, [lease], stall)
    assert answer.status_code == 400, answer.content
    assert "stall" in str(answer.json()), answer.json()  # the error names the field
    assert not DataStall.objects.filter(job_id=job["id"]).exists()
    assert Item.objects.get(id=lease["id"]).expires_at == expires  # the heartbeat itself did nothing either


def test_a_nan_is_a_400(worker_client, job_name):
    job = create_job(worker_client, job_name)
    (lease,) = take(worker_client, job["id"], "w")["leases"]
    body = f'{{"leases": [{{"id": {lease["id"]}, "token": {lease["token"]}}}], "stall": {{"clock": "c", "waited": NaN, "busy": 5}}}}'
    answer = worker_client.post("/api/v1/leases/extend/", body, content_type="application/json")
    assert answer.status_code == 400, answer.content
    assert not DataStall.objects.filter(job_id=job["id"]).exists()


def test_a_stall_sent_with_another_holders_lease_is_counted_nowhere(client_for, job_name):
    owner, stranger = client_for(Role.WORKER), client_for(Role.WORKER)
    job = create_job(owner, job_name)
    (lease,) = take(owner, job["id"], "owner")["leases"]
    answer = beat(stranger, [lease], {"clock": "x", "waited": 9.0, "busy": 0.0})
    assert answer.status_code == 200 and answer.json()["lost"] == [lease["id"]], answer.content
    assert not DataStall.objects.filter(job_id=job["id"]).exists()
    # A lease of the caller's that was completed (not extended) carries no stall either.
    assert (
        owner.post(f"/api/v1/leases/{lease['id']}/complete/", {"token": lease["token"]}, format="json").status_code
        == 200
    )
    assert beat(owner, [lease], {"clock": "x", "waited": 9.0, "busy": 0.0}).status_code == 200
    assert not DataStall.objects.filter(job_id=job["id"]).exists()


def test_a_heartbeat_without_a_stall_leaves_the_counts(worker_client, job_name):
    job = create_job(worker_client, job_name)
    (lease,) = take(worker_client, job["id"], "w")["leases"]
    assert beat(worker_client, [lease], {"clock": "c", "waited": 1.0, "busy": 1.0}).status_code == 200
    refs = [{"id": lease["id"], "token": lease["token"]}]
    assert worker_client.post("/api/v1/leases/extend/", {"leases": refs}, format="json").status_code == 200
    assert counted(job["id"], "w") == (1.0, 2.0)


def test_metrics_export_each_loops_seconds_as_counters(worker_client, client, job_name):
    job = create_job(worker_client, job_name)
    (lease,) = take(worker_client, job["id"], "slow-loop")["leases"]
    assert beat(worker_client, [lease], {"clock": "c", "waited": 8.0, "busy": 2.0}).status_code == 200
    text = client.get("/metrics").content.decode()
    assert re.search(r"^# TYPE shardline_data_wait_seconds(_total)? counter$", text, re.M), text
    assert f'shardline_data_wait_seconds_total{{job="{job_name}",worker="slow-loop"}} 8.0' in text
    assert f'shardline_data_loop_seconds_total{{job="{job_name}",worker="slow-loop"}} 10.0' in text
