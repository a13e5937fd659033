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


def json_schema(node):
    """OpenAPI 3.0's ``nullable: true`` as JSON Schema says it (a null type)."""
    if isinstance(node, list):
        return [json_schema(value) for value in node]
    if not isinstance(node, dict):
        return node
    node = {key: json_schema(value) for key, value in node.items()}
    if node.pop("nullable", False):
        node["type"] = [node["type"], "null"]
    return node


def request_schema(document, path: str) -> dict:
    """The JSON Schema of ``POST path``'s body in an OpenAPI document, with the components its $ref resolves in."""
    body = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return {**body, "components": document["components"]}
