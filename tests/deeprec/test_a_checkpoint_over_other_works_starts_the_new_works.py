"""A checkpoint of the run's queue over other works is abandoned and the new works start (issue 28).

DeepRec restores such a checkpoint by logging "Works queue ... abandoned in
checkpoint" and starting the new works. Found: the restarted process died
with JobSpecConflictError while saving its first checkpoint. Now the queue of
the checkpoint's job (same name, other works) is replaced on the server: that
job is cancelled and renamed, and the new works get the name.
"""

import uuid

import pytest

from server.models import Event, Job
from tests.security.trust import live_tokens

pytestmark = pytest.mark.tf

OLD = ["/to", "/be", "/or", "/not"]
NEW = ["/fast", "/fox", "/jumps", "/over"]


def test_tf1_monitored_sessions_restart_on_other_works(graph_worker, sdk_env, tmp_path):
    name = f"works_changed_{uuid.uuid4().hex[:8]}"
    first = graph_worker("checkpoint", "--dir", str(tmp_path), "--name", name, *OLD)
    assert first.items == ["/to"]
    second = graph_worker("checkpoint", "--dir", str(tmp_path), "--name", name, *NEW)
    assert second.items == ["/fast"]
    assert "abandoned in checkpoint" in second.stderr

    job_name = f"{name}.{sdk_env['SHARDLINE_RUN']}"
    new = Job.objects.get(name=job_name)
    old = Job.objects.get(name__startswith=f"{job_name}-replaced-")
    assert (
        new.spec_digest != old.spec_digest and old.state == "cancelled" and old.name == f"{job_name}-replaced-{old.id}"
    )
    assert Event.objects.filter(job=old, message__contains="replaced").exists()
    # The third run restores the new works' checkpoint as usual: same job, no replacement.
    third = graph_worker("checkpoint", "--dir", str(tmp_path), "--name", name, *NEW)
    assert third.items and Job.objects.filter(name__startswith=job_name).count() == 2


def test_tf2_checkpoint_over_other_works_starts_the_new_works(sdk_env, tmp_path, caplog):
    import tensorflow as tf

    from worker_sdk import WorkQueue

    name = f"works_changed_tf2_{uuid.uuid4().hex[:8]}"
    saved = WorkQueue(OLD, shuffle=False, name=name)
    assert saved.take().numpy() == b"/to"
    path = tf.train.Checkpoint(work_queue=saved).save(str(tmp_path / "ckpt"))

    restarted = WorkQueue(NEW, shuffle=False, name=name)
    with caplog.at_level("WARNING", logger="worker_sdk"):
        tf.train.Checkpoint(work_queue=restarted).restore(path)
    assert "abandoned in checkpoint" in caplog.text
    assert [restarted.take().numpy() for _ in NEW] == [w.encode() for w in NEW]
    assert restarted.job["id"] != saved.job["id"] and restarted.job["name"] == saved.job["name"]


def test_only_a_job_of_the_same_name_and_a_caller_allowed_to_restore_it_is_replaced(
    live_api, live_server_url, test_database_url
):
    # Another worker user, through the server too: a test asking for the in-process database fixtures would
    # run among pytest-django's database tests, before the transactional ones that empty the tables.
    worker, (stranger,) = live_api("worker"), live_tokens(live_server_url, test_database_url, [("worker", None, None)])
    name = f"replace-{uuid.uuid4().hex[:8]}"
    old = worker.post("/api/v1/jobs/", {"name": name, "works": OLD}).json()
    other = worker.post("/api/v1/jobs/", {"name": name + "-x", "works": OLD}).json()

    # Another id than the name's job: still the spec conflict, nothing changes.
    refused = worker.post("/api/v1/jobs/", {"name": name, "works": NEW, "replaces": other["id"]})
    assert refused.status_code == 409 and refused.json()["error"] == "job_spec_conflict"
    # Another user's unscoped worker token may not cancel this job by replacing it.
    denied = stranger.post("/api/v1/jobs/", {"name": name, "works": NEW, "replaces": old["id"]})
    assert denied.status_code == 403 and "replace" in denied.json()["message"]
    assert Job.objects.get(pk=old["id"]).name == name

    replaced = worker.post("/api/v1/jobs/", {"name": name, "works": NEW, "replaces": old["id"]})
    assert replaced.status_code == 201 and replaced.json()["id"] != old["id"]
    # Every worker of the restarted run sends the same: they attach.
    again = worker.post("/api/v1/jobs/", {"name": name, "works": NEW, "replaces": old["id"]})
    assert again.status_code == 200 and again.json()["id"] == replaced.json()["id"]
