"""The OpenAPI schema is a contract a generated client can trust (server/api/schema.py): every operation
documents its error answers with the one error body, request bodies refuse unknown fields, works is the
array of strings it is, and ids and pages carry the bounds the server checks."""

import re

import pytest
import yaml

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    return yaml.safe_load(response.content)


def test_every_operation_documents_its_error_answers(schema):
    for path, operations in schema["paths"].items():
        if not path.startswith("/api/v1/"):
            continue
        for method, operation in operations.items():
            for status in ("400", "401", "403", "404", "413", "503"):
                assert status in operation["responses"], (method, path, status)


def test_request_bodies_refuse_unknown_fields(schema):
    requests = {name: s for name, s in schema["components"]["schemas"].items() if name.endswith("Request")}
    assert {"JobCreateRequest", "TakeRequest", "CompleteRequest"} <= set(requests)
    for name, body in requests.items():
        assert body["additionalProperties"] is False, name


def test_works_is_an_array_of_strings(schema):
    works = schema["components"]["schemas"]["JobCreateRequest"]["properties"]["works"]
    assert works["type"] == "array" and works["minItems"] == 1
    assert works["items"]["type"] == "string" and works["items"]["maxLength"] == 4096


def test_ids_and_pages_carry_their_bounds(schema):
    (parameter,) = [p for p in schema["paths"]["/api/v1/jobs/{job_id}/"]["get"]["parameters"] if p["in"] == "path"]
    assert parameter["schema"]["maximum"] == 2**63 - 1
    page = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"]}
    assert page["page"]["minimum"] == 1 and page["page_size"]["maximum"] == 500


def test_a_required_string_that_is_stripped_says_it_needs_more_than_whitespace(schema):
    # DRF strips strings before it checks them, so " " or "\r" is refused as
    # blank: a schema that allows it makes a schema-valid request a 400
    # (schemathesis found one in the resume route).
    for name, component in schema["components"]["schemas"].items():
        if not name.endswith("Request"):
            continue
        for field, spec in component.get("properties", {}).items():
            if spec.get("type") == "string" and spec.get("minLength", 0) >= 1:
                pattern = re.compile(spec["pattern"])
                assert not any(pattern.search(blank) for blank in (" ", "\r", "\t\n", "\x1c")), (name, field)


def test_a_free_text_query_string_refuses_nul_as_the_server_does(schema, admin_client, job_name):
    # The filter refuses NUL (Postgres text cannot hold one); a schema that
    # allowed it made a schema-valid request a 400 (schemathesis, ST202).
    strings = [
        (path, p["name"], p["schema"])
        for path, operations in schema["paths"].items()
        for operation in operations.values()
        for p in operation.get("parameters", [])
        if p["in"] == "query" and p["schema"].get("type") == "string" and "enum" not in p["schema"]
    ]
    assert ("/api/v1/jobs/{job_id}/items/", "worker") in {(path, name) for path, name, _ in strings}
    for path, name, spec in strings:
        assert not re.search(spec["pattern"], "w\x00"), (path, name)
    job = admin_client.post("/api/v1/jobs/", {"name": job_name, "works": ["a"]}, format="json")
    answer = admin_client.get(f"/api/v1/jobs/{job.json()['id']}/items/", {"worker": "w\x00"})
    assert answer.status_code == 400 and "worker" in answer.json()["fields"]


@pytest.mark.parametrize("path", ["resume", "snapshot"])
def test_a_worker_name_is_as_long_as_sent_not_as_stripped(worker_client, job_name, path):
    # A schema-violating request accepted (schemathesis): 256 characters with
    # a leading "\x1c" passed maxLength 255 once DRF had stripped them.
    job = worker_client.post("/api/v1/jobs/", {"name": job_name, "works": ["/a"]}, format="json").json()
    url = {"resume": f"/api/v1/jobs/{job['id']}/leases/resume/", "snapshot": f"/api/v1/jobs/{job['id']}/snapshots/"}[
        path
    ]
    too_long = worker_client.post(url, {"worker": "\x1c" + "w" * 255}, format="json")
    assert too_long.status_code == 400, too_long.content
    assert list(too_long.json()["fields"]) == ["worker"]
    assert worker_client.post(url, {"worker": " w "}, format="json").status_code in (200, 201)
