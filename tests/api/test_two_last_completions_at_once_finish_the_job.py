"""The last two leases of a job completed at once, in two requests: the job is done.

A standalone completion looks for the job's end in its own transaction (so
that the end and the completion reach waiting takes together). Two last
completions committing together each saw the other's lease still held
there, and the job stayed running with every item done: a DataLoader's
loaders acknowledge what their loop received from a thread, beside the
takes of their siblings, and the tail tests met it. The interleaving is
forced here: each request's look inside its transaction waits until both
requests are there.
"""

import threading

import pytest
from django.db import connections
from rest_framework.test import APIClient

from server.models import Job
from server.services import jobs

from .helpers import complete, create_job, take

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def test_two_last_completions_committing_together_finish_the_job(worker_client, job_name, monkeypatch):
    job = create_job(worker_client, job_name, ["/a", "/b"], shuffle=False)
    # Two workers: each completion counts on its own worker's row, and
    # neither waits for the other's lock.
    held = take(worker_client, job["id"], "w1")["leases"] + take(worker_client, job["id"], "w2")["leases"]
    assert len(held) == 2

    both_inside = threading.Barrier(2, timeout=20)
    real_finish = jobs.finish_if_done
    inside = threading.local()

    def finish_when_both_are_inside(job_id):
        if not getattr(inside, "looked", False):
            inside.looked = True
            both_inside.wait()  # each request's completion is written, neither committed
        return real_finish(job_id)

    monkeypatch.setattr(jobs, "finish_if_done", finish_when_both_are_inside)
    answers = []

    def complete_in_a_request_of_its_own(lease):
        client = APIClient()
        client.credentials(**worker_client._credentials)  # the holder's token
        try:
            answers.append(complete(client, lease).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=complete_in_a_request_of_its_own, args=(lease,)) for lease in held]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert answers == [200, 200]
    assert all(not thread.is_alive() for thread in threads)
    assert Job.objects.get(pk=job["id"]).state == "done"
