"""What the OpenAPI schema says of every operation beyond what its view declares (a drf-spectacular hook).

Every answer the API can give is documented, so a client generated from the
schema (and schemathesis's checks) can trust it:

- the error answers any operation may give: 400 (invalid input), 401 (no
  or a bad token), 403 (a role or scope that may not), 404 (no such
  object, or a path parameter of another type), 413 (a body over its
  limit), 415 (not JSON), 503 (the database is away; retry), all with the
  one error body;
- request bodies refuse fields they do not know (``additionalProperties:
  false``: every request serializer is strict);
- the query parameters the views check take the bounds they check.
"""

from __future__ import annotations

from .serializers import WORK_PATTERN

ERRORS = {
    "400": "Invalid input: the message says what, `fields` which.",
    "401": "No token, or one that is not valid.",
    "403": "The token's role or scope may not do this.",
    "404": "No such object (or a path parameter that is not one).",
    "413": "The request body is larger than its limit.",
    "415": "The request body is not JSON.",
    "503": "The database is unavailable: retry after Retry-After seconds.",
}
ERROR_BODY = {
    "type": "object",
    "properties": {
        "error": {"type": "string"},
        "message": {"type": "string"},
        # Field -> messages for invalid input; the differing fields' names for a spec conflict.
        "fields": {"oneOf": [{"type": "object"}, {"type": "array", "items": {"type": "string"}}]},
    },
    "required": ["error", "message"],
}
# (path, parameter) -> bounds the view checks (server/api/serializers.py, views.py).
QUERY_BOUNDS = {
    ("/api/v1/jobs/{job_id}/items/", "epoch"): {"minimum": 0, "maximum": 2**31 - 1},
    ("/api/v1/jobs/{job_id}/items/", "page_size"): {"minimum": 1, "maximum": 1000},
    ("/api/v1/workers/", "job"): {"minimum": 0},
    ("/api/v1/jobs/{job_id}/records/", "upto_epoch"): {"minimum": 0},
}
PAGE_BOUNDS = {"page": {"minimum": 1, "maximum": 2**63 - 1}, "page_size": {"minimum": 1, "maximum": 500}}
# Ids are Postgres bigints: a larger path parameter is out of range (a 400).
PATH_ID_BOUNDS = {"minimum": 0, "maximum": 2**63 - 1}
# (request component, field) -> bounds its serializer checks that drf-spectacular does not carry over.
BODY_BOUNDS = {("ExtendManyRequest", "leases"): {"minItems": 1}}
# Request strings, in a body or a query, refuse NUL (Postgres text cannot hold one), except error texts, kept
# with NUL written as \x00;
# a worker name (a take's, a resume's) and a consumer must also hold more than whitespace.
NUL_FREE = r"^[^\x00]*$"
KEEPS_NUL = {("FailRequest", "error"), ("ReleaseRequest", "reason")}
STRING_PATTERNS = {
    ("TakeRequest", "worker"): WORK_PATTERN,
    ("TakeRequest", "consumer"): WORK_PATTERN,
    ("ResumeLeasesRequest", "worker"): WORK_PATTERN,
}
# An empty Idempotency-Key is no key (server/services/requests.py check_key).
HEADER_BOUNDS = {"Idempotency-Key": {"pattern": "^[A-Za-z0-9_-]{0,64}$"}}


def postprocess(result, generator, request, public):
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = ERROR_BODY
    for name, schema in components.items():
        if name.endswith("Request") and schema.get("type") == "object":
            schema["additionalProperties"] = False
    for name, schema in components.items():
        if not name.endswith("Request"):
            continue
        for field, spec in schema.get("properties", {}).items():
            if spec.get("type") == "string" and "pattern" not in spec and "enum" not in spec:
                if (name, field) not in KEEPS_NUL:
                    spec["pattern"] = STRING_PATTERNS.get((name, field), NUL_FREE)
    for (name, field), bounds in BODY_BOUNDS.items():
        components.get(name, {}).get("properties", {}).get(field, {}).update(bounds)
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/v1/"):
            continue
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for status, description in ERRORS.items():
                if status == "415" and "requestBody" not in operation:
                    continue
                responses.setdefault(
                    status,
                    {
                        "description": description,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    },
                )
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "path":
                    bounds = PATH_ID_BOUNDS
                elif parameter.get("in") == "header":
                    bounds = HEADER_BOUNDS.get(parameter["name"])
                    if bounds and parameter.get("schema", {}).get("type") == "string":
                        parameter["schema"].update(bounds)
                    continue
                else:
                    bounds = QUERY_BOUNDS.get((path, parameter["name"])) or PAGE_BOUNDS.get(parameter["name"])
                schema = parameter.get("schema", {})
                if bounds and schema.get("type") == "integer":
                    schema.update(bounds)
                elif schema.get("type") == "string" and "pattern" not in schema and "enum" not in schema:
                    schema["pattern"] = NUL_FREE
    return result
