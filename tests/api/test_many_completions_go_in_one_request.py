"""``POST /api/v1/leases/complete/``: many completions in one request, each as the one-lease complete makes it.

A lost completion (an old token, a lease taken back, another's lease)
changes nothing and is named in the answer; the others still count. Its
body is parsed by the wire protocol (worker_sdk.protocol.parse_completions),
held here to the schema the OpenAPI document publishes.
"""

import jsonschema
import pytest
from django.conf import settings
from drf_spectacular.generators import SchemaGenerator
from rest_framework import serializers

from server.api.take_body import parse_complete_many
from server.models import Item

from .helpers import create_job, json_schema, request_schema, take

pytestmark = pytest.mark.django_db

PATH = "/api/v1/leases/complete/"


def refs(leases, **extra):
    return [{"id": lease["id"], "token": lease["token"], **extra} for lease in leases]


def test_many_leases_complete_in_one_request(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b", "/c", "/d"])
    leases = take(worker_client, job["id"], count=3)["leases"]
    response = worker_client.post(PATH, {"leases": refs(leases, records=7)}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {"completed": sorted(lease["id"] for lease in leases), "lost": []}
    states = dict(Item.objects.filter(job_id=job["id"]).values_list("id", "state"))
    assert sorted(states.values()) == ["done", "done", "done", "pending"]
    assert {lease["id"] for lease in leases} == {item for item, state in states.items() if state == "done"}
    assert set(Item.objects.filter(state="done", job_id=job["id"]).values_list("records", flat=True)) == {7}
    # Repeated (its answer was lost): accepted again, counted once.
    again = worker_client.post(PATH, {"leases": refs(leases, records=7)}, format="json").json()
    assert again == {"completed": sorted(lease["id"] for lease in leases), "lost": []}
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/watermarks/").json()["done"] == 3


def test_a_lost_completion_changes_nothing_and_the_others_count(worker_client, job_name, service_time):
    job = create_job(worker_client, job_name, ["/only"], max_attempts=5)
    (stale,) = take(worker_client, job["id"], worker="slow")["leases"]
    service_time.advance(job["lease_timeout"] + 1)  # the holder went quiet
    (taken_back,) = take(worker_client, job["id"], worker="fast")["leases"]
    assert taken_back["id"] == stale["id"] and taken_back["token"] != stale["token"]
    other = create_job(worker_client, f"{job_name}-other", ["/b"])  # one request may name leases of two jobs
    (held,) = take(worker_client, other["id"], worker="slow")["leases"]
    answer = worker_client.post(PATH, {"leases": refs([stale, held])}, format="json").json()
    assert answer == {"completed": [held["id"]], "lost": [stale["id"]]}
    item = Item.objects.get(pk=stale["id"])
    assert item.state == "leased" and item.worker == "fast" and item.token == taken_back["token"]
    assert Item.objects.get(pk=held["id"]).state == "done"


def test_the_last_completion_finishes_the_job(worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a", "/b"])
    leases = take(worker_client, job["id"], count=2)["leases"]
    assert worker_client.post(PATH, {"leases": refs(leases)}, format="json").status_code == 200
    assert worker_client.get(f"/api/v1/jobs/{job['id']}/").json()["state"] == "done"


# Bodies as a worker could send them: valid ones, and each way to be wrong.
CASES = [
    {"leases": [{"id": 1, "token": 2}]},
    {"leases": [{"id": 1, "token": 2, "records": 0}, {"id": 5, "token": 9, "records": None}]},
    {"leases": [{"id": 1, "token": 2**63 - 1}] * 1000},
    {},
    {"leases": []},
    {"leases": {}},
    {"leases": None},
    {"leases": [5]},
    {"leases": [{"id": 1}]},
    {"leases": [{"id": "1", "token": 2}]},
    {"leases": [{"id": 0, "token": 1}]},
    {"leases": [{"id": 1, "token": 2**63}]},
    {"leases": [{"id": 1, "token": 2, "records": -1}]},
    {"leases": [{"id": 1, "token": 2}] * 1001},
    [],
]
# What the parser refuses beyond what the schema can say.
BEYOND_THE_SCHEMA = [
    {"leases": [{"id": 1, "token": 2}], "colour": "blue"},  # unknown fields are refused (a typo is an error)
    {"leases": [{"id": 1, "token": 2, "extra": 1}]},
    {"leases": [{"id": True, "token": 2}]},  # a bool is an integer in Python, not in JSON
]


@pytest.fixture(scope="module")
def body_schema():
    assert settings.SHARDLINE_MAX_TAKE == 1000, "the cases are written for the default limit"
    document = SchemaGenerator().get_schema(request=None, public=True)
    return request_schema(document, PATH)


def parser_accepts(data) -> bool:
    try:
        parse_complete_many(data)
    except serializers.ValidationError:
        return False
    return True


@pytest.mark.parametrize("data", CASES, ids=[repr(c)[:40] for c in CASES])
def test_the_parser_accepts_what_the_schema_describes(body_schema, data):
    assert parser_accepts(data) == jsonschema.Draft4Validator(json_schema(body_schema)).is_valid(data)


@pytest.mark.parametrize("data", BEYOND_THE_SCHEMA, ids=[repr(c)[:40] for c in BEYOND_THE_SCHEMA])
def test_the_parser_refuses_more_than_the_schema_can_say(data):
    assert not parser_accepts(data)


@pytest.mark.parametrize("body", [{}, {"leases": []}, {"leases": [{"id": "x", "token": 1}]}, []])
def test_a_bad_body_is_a_400_naming_the_field_and_changes_nothing(worker_client, job_name, body):
    job = create_job(worker_client, job_name, ["/a"])
    take(worker_client, job["id"])
    response = worker_client.post(PATH, body, format="json")
    assert response.status_code == 400, response.content
    assert "leases" in response.content.decode() or "non_field_errors" in response.content.decode()
    assert Item.objects.get(job_id=job["id"]).state == "leased"
