"""A take whose answer is lost on the way is retried with its key: the server answers it again, nothing is stranded."""

import urllib3

from worker_sdk import WorkQueue
from worker_sdk.client import Client
from worker_sdk.transport import Transport


class LosesTakeAnswers(Transport):
    """Sends each request, then loses the answer of every other take that leased something."""

    lost = 0
    takes = 0

    def send(self, method, url, body, headers, timeout):
        reply = super().send(method, url, body, headers, timeout)
        if method == "POST" and url.endswith("/leases/") and reply.status < 400 and reply.json()["leases"]:
            type(self).takes += 1
            if type(self).takes % 2:
                type(self).lost += 1
                raise urllib3.exceptions.ProtocolError("connection reset after the server answered")
        return reply


def test_every_item_is_leased_once_although_half_the_take_answers_were_lost(sdk_env, live_api):
    works = [f"/d/{i}" for i in range(6)]
    LosesTakeAnswers.lost = LosesTakeAnswers.takes = 0  # counted across the sessions of this test only
    # A short lease timeout: a stranded lease would expire and be leased a
    # second time within the test, which the attempts below would show.
    queue = WorkQueue(works, shuffle=False, lease_timeout=1, client=Client(LosesTakeAnswers(retry_seconds=30)))
    assert list(queue.items()) == works
    assert LosesTakeAnswers.lost >= 3

    job_id = queue.job["id"]
    rows = live_api().get(f"/api/v1/jobs/{job_id}/items/").json()["results"]
    assert sorted((row["item"], row["state"], row["attempts"]) for row in rows) == [(w, "done", 1) for w in works]
    queue.close()


def test_a_closed_queue_reconnects_and_heartbeats_again_when_used(sdk_env):
    queue = WorkQueue(["/a", "/b", "/c"], shuffle=False)
    with queue.lease() as item:
        assert item == "/a"
    stopped = queue._consumers.current
    queue.close()
    assert not queue._client.transport.connected  # its connections are closed
    assert stopped._heartbeat.join(timeout=10)  # its heartbeat thread ended

    iterator = queue.items()
    assert next(iterator) == "/b"
    assert queue._consumers.current is not stopped and queue._consumers.current._heartbeat.alive()
    assert list(iterator) == ["/c"]
    assert queue.watermarks()["state"] == "done"
