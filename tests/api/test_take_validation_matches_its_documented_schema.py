"""parse_take, the take's one validator, accepts exactly what the published OpenAPI schema describes."""

import dataclasses

import jsonschema
import pytest
from django.conf import settings
from drf_spectacular.generators import SchemaGenerator
from rest_framework import serializers

from server.api.take_body import parse_take
from worker_sdk.protocol import Completion, Lease, TakeAnswer, TakeRequest, TakeScope

from .helpers import json_schema, request_schema

# JSON bodies as a worker could send them: valid ones, and each way to be wrong.
CASES = [
    {"worker": "w"},
    {"worker": " w ", "count": 3},
    {"worker": "w", "count": 1000},
    {"worker": "w", "complete": [{"id": 1, "token": 2}]},
    {"worker": "w", "complete": [{"id": 1, "token": 2, "records": 0}, {"id": 5, "token": 9, "records": None}]},
    {"worker": "w", "complete": [{"id": 1, "token": 2**63 - 1}] * 1000},
    {"worker": "w", "consumer": "main"},
    {"worker": "w", "wait": 20},
    {"worker": "w", "wait": 0.5},
    {"worker": "w", "wait": 30},
    {"worker": "w", "tracks": True},
    {"worker": "w", "upto_epoch": 0, "sync": True, "max_records": 1},
    {"worker": "w", "upto_epoch": None, "max_records": None},
    {"worker": "w", "upto_epoch": 3, "from_epoch": 3, "sync": True},
    {"worker": "w", "from_epoch": None},
    {"worker": "x" * 255},
    {},
    {"worker": ""},
    {"worker": 5},
    {"worker": "x" * 256},
    {"worker": "w", "count": 0},
    {"worker": "w", "count": 1001},
    {"worker": "w", "count": 2.5},
    {"worker": "w", "count": "3"},
    {"worker": "w", "complete": {}},
    {"worker": "w", "complete": [5]},
    {"worker": "w", "complete": [{"id": 1}]},
    {"worker": "w", "complete": [{"id": "1", "token": 2}]},
    {"worker": "w", "complete": [{"id": 0, "token": 1}]},
    {"worker": "w", "complete": [{"id": 1, "token": 2**63}]},
    {"worker": "w", "complete": [{"id": 1, "token": 2, "records": -1}]},
    {"worker": "w", "complete": [{"id": 1, "token": 2}] * 1001},
    {"worker": "w", "consumer": ""},
    {"worker": "w", "consumer": 5},
    {"worker": "w", "consumer": "c" * 256},
    {"worker": "w", "wait": -1},
    {"worker": "w", "wait": 31},
    {"worker": "w", "wait": "5"},
    {"worker": "w", "wait": None},
    {"worker": "w", "tracks": 1},
    {"worker": "w", "tracks": "yes"},
    {"worker": "w", "upto_epoch": -1},
    {"worker": "w", "upto_epoch": 10001},
    {"worker": "w", "from_epoch": -1},
    {"worker": "w", "from_epoch": "2"},
    {"worker": "w", "sync": "true"},
    {"worker": "w", "max_records": 0},
    {"worker": "w", "max_records": 2.5},
    [],
]

# What parse_take refuses beyond what the schema can say, and why.
BEYOND_THE_SCHEMA = [
    {"worker": "   "},  # blank once stripped
    {"worker": "w\x00"},  # Postgres text cannot hold NUL
    {"worker": "w", "consumer": "  "},
    {"worker": "w", "count": True},  # JSON Schema's integer: a bool is not one in JSON, but is in Python
    {"worker": "w", "wait": True},
    {"worker": "w", "colour": "blue"},  # unknown fields are refused (a typo is an error)
    {"worker": "w", "complete": [{"id": 1, "token": 2, "extra": 1}]},
]


@pytest.fixture(scope="module")
def take_schema():
    assert settings.SHARDLINE_MAX_TAKE == 1000, "the cases are written for the default limit"
    document = SchemaGenerator().get_schema(request=None, public=True)
    return request_schema(document, "/api/v1/jobs/{job_id}/leases/")


def schema_accepts(schema, data) -> bool:
    return jsonschema.Draft4Validator(json_schema(schema)).is_valid(data)


def validator_accepts(data) -> bool:
    try:
        parse_take(data)
    except serializers.ValidationError:
        return False
    return True


@pytest.mark.parametrize("data", CASES, ids=[repr(c)[:40] for c in CASES])
def test_the_validator_accepts_what_the_schema_describes(take_schema, data):
    assert validator_accepts(data) == schema_accepts(take_schema, data)


@pytest.mark.parametrize("data", BEYOND_THE_SCHEMA, ids=[repr(c)[:40] for c in BEYOND_THE_SCHEMA])
def test_the_validator_refuses_more_than_the_schema_can_say(take_schema, data):
    assert not validator_accepts(data)


def test_a_valid_body_is_stripped_and_completed_with_defaults():
    assert parse_take({"worker": " w ", "complete": [{"id": 1, "token": 2}]}) == TakeRequest(
        worker="w", consumer="w", count=1, complete=(Completion(1, 2, None),), wait=0.0, tracks=False, scope=TakeScope()
    )


@pytest.mark.parametrize("data", [c for c in CASES if validator_accepts(c)], ids=lambda c: repr(c)[:40])
def test_what_the_sdk_sends_parses_back_to_the_same_request(data):
    # The SDK's client sends TakeRequest.to_json(): the server must read the same request from it.
    request = parse_take(data)
    assert parse_take(request.to_json()) == request


def test_the_schema_documents_every_field_of_the_protocols_request(take_schema):
    name = take_schema["$ref"].rsplit("/", 1)[1]
    documented = set(take_schema["components"]["schemas"][name]["properties"])
    fields = {f.name for f in dataclasses.fields(TakeRequest) if f.name != "scope"}
    assert documented == fields | {f.name for f in dataclasses.fields(TakeScope)}


def test_a_take_answer_reads_back_as_rendered():
    lease = Lease(7, 9, "/a", 0, 3, None, 0, 10, 20, (10, 0), {"table": "t"})
    answer = TakeAnswer(leases=(lease,), completed=(5, 2), lost=(4,), waiting_on=0, leased_by_you=1)
    rendered = answer.to_json()
    assert rendered["completed"] == [2, 5] and rendered["leases"][0]["seek"] == [10, 0]
    assert TakeAnswer.from_json(rendered) == TakeAnswer(
        leases=(lease,), completed=(2, 5), lost=(4,), waiting_on=0, leased_by_you=1
    )


def test_the_schema_documents_every_field_of_the_protocols_answer_and_lease():
    from server.api.responses import LeaseSerializer, TakeResponseSerializer

    lease = Lease(1, 2, "/a", 0, 0)
    assert set(TakeResponseSerializer().fields) == set(TakeAnswer().to_json())
    assert set(LeaseSerializer().fields) == set(lease.to_json())
