def create_job(client, name, works=None, **fields):
    body = {"name": name, "works": works if works is not None else [f"/data/part-{i:03d}" for i in range(10)], **fields}
    response = client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


def take(client, job_id, worker="w1", count=1, complete=()):
    response = client.post(
        f"/api/v1/jobs/{job_id}/leases/",
        {"worker": worker, "count": count, "complete": list(complete)},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def complete(client, lease, **extra):
    return client.post(f"/api/v1/leases/{lease['id']}/complete/", {"token": lease["token"], **extra}, format="json")


def drain(client, job_id, worker="w1", count=1):
    """Takes and completes everything; returns the items in the order handed out."""
    items = []
    pending = []
    while True:
        result = take(client, job_id, worker, count, complete=pending)
        pending = [{"id": lease["id"], "token": lease["token"]} for lease in result["leases"]]
        items += [lease["item"] for lease in result["leases"]]
        if result["exhausted"]:
            return items
        assert result["leases"] or result["retry_after"] is not None
