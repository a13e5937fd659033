"""A lease belongs to the user whose token took it: nobody else completes, fails, extends, releases or splits it.

Against the real server (gunicorn + uvicorn, as ``make run`` serves): a
second worker user who learns a lease's id and fencing token (from a log, a
shared notebook) is refused everywhere, and the lease stays its holder's.
Fencing tokens are unguessable and shown to nobody but the holder.
"""

import uuid

import pytest

from .trust import live_tokens, new_job, take


@pytest.fixture(scope="module")
def two_workers(live_server_url, test_database_url):
    return live_tokens(live_server_url, test_database_url, [("worker", None, None), ("worker", None, None)])


def test_another_user_cannot_touch_a_lease_even_with_its_token(two_workers, live_api):
    holder, other = two_workers
    job = new_job(holder, f"own-{uuid.uuid4().hex[:8]}", works=["/data/a.csv?start=0&end=100"])
    (lease,) = take(holder, job["id"]).json()["leases"]
    ref = {"token": lease["token"]}
    for verb, body in [
        ("complete", ref),
        ("fail", {**ref, "error": "not yours"}),
        ("extend", ref),
        ("release", {**ref, "reason": "not yours"}),
        ("split", {**ref, "at": 50}),
    ]:
        response = other.post(f"/api/v1/leases/{lease['id']}/{verb}/", body)
        assert response.status_code == 409, (verb, response.status_code, response.text)
    many = other.post("/api/v1/leases/extend/", {"leases": [{"id": lease["id"], "token": lease["token"]}]}).json()
    assert many["lost"] == [lease["id"]] and many["extended"] == {}
    # A heartbeat that asks to wait and says it returns, then falls silent: it
    # extended nothing, so nothing of the holder's is awaited or expired
    # (server/holders.py follows only the leases an answer extended).
    body = {"leases": [{"id": lease["id"], "token": lease["token"]}], "wait": 1, "returns": True}
    held = other.post("/api/v1/leases/extend/", body).json()
    assert held["lost"] == [lease["id"]] and held["extended"] == {}, held
    batch = other.post("/api/v1/leases/complete/", {"leases": [{"id": lease["id"], "token": lease["token"]}]})
    assert batch.status_code == 200 and batch.json() == {"completed": [], "lost": [lease["id"]]}, batch.text
    # Through a take's completions too: refused as lost, nothing leased to the holder changes.
    answer = take(other, job["id"], worker="w2", count=1, complete=[{"id": lease["id"], "token": lease["token"]}])
    assert answer.status_code == 200 and answer.json()["lost"] == [lease["id"]]

    audit = live_api("admin").get(f"/api/v1/jobs/{job['id']}/items/").json()["results"]
    (row,) = audit
    assert row["state"] == "leased" and row["worker"] == "w1" and row["attempts"] == 1
    # The holder still holds it.
    done = holder.post(f"/api/v1/leases/{lease['id']}/complete/", ref)
    assert done.status_code == 200, done.text


def test_fencing_tokens_are_random_and_hidden_from_everyone_but_the_holder(two_workers, live_api):
    holder, _other = two_workers
    job = new_job(holder, f"rand-{uuid.uuid4().hex[:8]}", works=[f"/w{i}" for i in range(40)])
    leases = take(holder, job["id"], count=40).json()["leases"]
    tokens = sorted(lease["token"] for lease in leases)
    assert len(set(tokens)) == 40
    # 63 random bits: no small values, no runs of consecutive values.
    assert tokens[0] > 2**40
    assert all(b - a > 1 for a, b in zip(tokens, tokens[1:]))
    viewer = live_api("viewer")
    for lease in leases[:3]:
        history = viewer.get(f"/api/v1/jobs/{job['id']}/items/{lease['id']}/history/")
        assert history.status_code == 200
        assert str(lease["token"]) not in history.text
    audit = viewer.get(f"/api/v1/jobs/{job['id']}/items/?format=csv")
    assert audit.status_code == 200 and not any(str(t) in audit.text for t in tokens)
