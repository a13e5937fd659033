"""A token limited to jobs by name (``create_token --jobs 'ctr-*'``) reaches those jobs and no other.

Every other job is not found, on every endpoint, as a job that does not
exist would be: its state, items, workers, snapshots and leases, and no
lease can be taken from it. Creating a job outside the scope is refused.
"""

import uuid

import pytest

from .trust import live_tokens, new_job, take


@pytest.fixture
def jobs(live_api):
    admin = live_api("admin")
    tag = uuid.uuid4().hex[:8]
    mine = new_job(admin, f"ctr-{tag}")
    other = new_job(admin, f"other-{tag}")
    snapshot = admin.post(f"/api/v1/jobs/{other['id']}/snapshots/", {"worker": "admin"}).json()
    return tag, mine, other, snapshot


def test_a_scoped_worker_token_sees_and_leases_only_its_jobs(jobs, live_server_url, test_database_url):
    tag, mine, other, snapshot = jobs
    (scoped,) = live_tokens(live_server_url, test_database_url, [("worker", [f"ctr-{tag}*"], None)])

    listed = {job["name"] for job in scoped.get("/api/v1/jobs/?page_size=200").json()["results"]}
    assert mine["name"] in listed and other["name"] not in listed
    assert take(scoped, mine["id"]).json()["leases"]

    not_found = [
        scoped.get(f"/api/v1/jobs/{other['id']}/"),
        scoped.get(f"/api/v1/jobs/{other['id']}/watermarks/"),
        scoped.get(f"/api/v1/jobs/{other['id']}/records/?upto_epoch=0"),
        scoped.get(f"/api/v1/jobs/{other['id']}/items/"),
        scoped.get(f"/api/v1/jobs/{other['id']}/items/?format=csv"),
        scoped.get(f"/api/v1/jobs/{other['id']}/items/1/history/"),
        scoped.get(f"/api/v1/workers/?job={other['id']}"),
        take(scoped, other["id"]),
        scoped.post(f"/api/v1/jobs/{other['id']}/snapshots/", {"worker": "w1"}),
        scoped.post(f"/api/v1/jobs/{other['id']}/snapshots/{snapshot['id']}/restore/", {"worker": "w1"}),
    ]
    for response in not_found:
        assert response.status_code == 404, (response.request.url, response.status_code, response.text)
        assert response.json()["message"] == f"no job with id {other['id']}"
    workers = scoped.get("/api/v1/workers/?page_size=200").json()["results"]
    assert all(worker["job"] != other["id"] for worker in workers)

    refused = scoped.post("/api/v1/jobs/", {"name": f"other-{tag}-2", "works": ["/x"]})
    assert refused.status_code == 403 and f"ctr-{tag}*" in refused.json()["message"]
    created = scoped.post("/api/v1/jobs/", {"name": f"ctr-{tag}-2", "works": ["/x"]})
    assert created.status_code == 201, created.text


def test_a_scope_pattern_is_matched_whole_and_literally(jobs, live_server_url, test_database_url):
    tag, mine, _other, _snapshot = jobs
    # '.' and '-' are themselves, not regular-expression syntax; the whole name must match.
    outside = [f"ctr.{tag}", f"ctr-{tag[:-1]}", f"tr-{tag}", "ctr-[a-z]*"]
    inside = [f"ctr-{tag}", f"ctr-{tag[:-1]}?", "ctr-*", "*"]
    tokens = live_tokens(
        live_server_url,
        test_database_url,
        [("worker", [p], None) for p in outside] + [("worker", ["nothing", p], None) for p in inside],
    )
    for pattern, scoped in zip(outside, tokens):
        assert scoped.get(f"/api/v1/jobs/{mine['id']}/").status_code == 404, pattern
        assert take(scoped, mine["id"]).status_code == 404, pattern
    for pattern, scoped in zip(inside, tokens[len(outside) :]):
        assert scoped.get(f"/api/v1/jobs/{mine['id']}/").status_code == 200, pattern
        assert take(scoped, mine["id"], worker=f"w-{pattern}").status_code == 200, pattern


def test_a_scoped_tokens_leases_of_a_job_are_held_within_its_scope(jobs, live_server_url, test_database_url):
    """The same user's other token, scoped elsewhere, cannot complete them either."""
    tag, mine, _other, _snapshot = jobs
    user = f"worker-{tag}"
    first, elsewhere = live_tokens(
        live_server_url, test_database_url, [("worker", [f"ctr-{tag}"], user), ("worker", ["unrelated-*"], user)]
    )
    (lease,) = take(first, mine["id"]).json()["leases"]
    refused = elsewhere.post(f"/api/v1/leases/{lease['id']}/complete/", {"token": lease["token"]})
    assert refused.status_code == 409
    assert first.post(f"/api/v1/leases/{lease['id']}/complete/", {"token": lease["token"]}).status_code == 200
