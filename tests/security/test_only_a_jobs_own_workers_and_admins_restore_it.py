"""A snapshot restore rolls a job back: an admin, the job's creator, or a token scoped to the job may; nobody else.

Found: any worker token restored any job's snapshot. A restarted training
run restores from its checkpoint with the token it created the job with
(or one scoped to the job's name); another worker user gets 403 and the job
keeps what it read.
"""

import uuid

from .trust import live_tokens, new_job, take


def test_restore_is_refused_to_another_worker_user(live_server_url, test_database_url, live_api):
    tag = uuid.uuid4().hex[:8]
    creator, stranger, scoped = live_tokens(
        live_server_url,
        test_database_url,
        [("worker", None, None), ("worker", None, None), ("worker", [f"ctr-{tag}"], None)],
    )
    job = new_job(creator, f"ctr-{tag}")
    snapshot = creator.post(f"/api/v1/jobs/{job['id']}/snapshots/", {"worker": "w1"}).json()
    restore = f"/api/v1/jobs/{job['id']}/snapshots/{snapshot['id']}/restore/"

    (lease,) = take(creator, job["id"]).json()["leases"]
    assert creator.post(f"/api/v1/leases/{lease['id']}/complete/", {"token": lease["token"]}).status_code == 200

    refused = stranger.post(restore, {"worker": "w9"})
    assert refused.status_code == 403, refused.text
    watermarks = live_api("viewer").get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    assert watermarks["done"] == 1  # nothing was rolled back

    for allowed in (creator, scoped, live_api("admin")):
        response = allowed.post(restore, {"worker": "w1"})
        assert response.status_code == 200, response.text
    assert live_api("viewer").get(f"/api/v1/jobs/{job['id']}/watermarks/").json()["done"] == 0
