"""Repeats of one take sent at the same moment to a server of several processes lease its items once."""

import threading
import uuid


def test_eight_simultaneous_repeats_get_one_answer_and_one_set_of_leases(live_api):
    body = {"name": f"repeats-{uuid.uuid4().hex[:8]}", "works": [f"/d/{i}" for i in range(40)], "shuffle": False}
    job = live_api("worker").post("/api/v1/jobs/", body).json()
    key = uuid.uuid4().hex
    clients = [live_api("worker") for _ in range(8)]  # a connection each: the server's processes answer them
    start = threading.Barrier(len(clients))
    answers = [None] * len(clients)

    def send(index):
        start.wait()
        answers[index] = clients[index].post(
            f"/api/v1/jobs/{job['id']}/leases/",
            {"worker": "w1", "count": 3, "complete": []},
            headers={"Idempotency-Key": key},
        )

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [answer.status_code for answer in answers] == [200] * len(clients)
    bodies = [answer.json() for answer in answers]
    assert all(body == bodies[0] for body in bodies) and len(bodies[0]["leases"]) == 3
    marks = live_api().get(f"/api/v1/jobs/{job['id']}/watermarks/").json()
    assert (marks["leased"], marks["pending"]) == (3, 37)
