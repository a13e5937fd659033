"""parse_take (the hot path) and TakeSerializer (the OpenAPI schema) agree on every input."""

import pytest
from rest_framework import serializers

from server.api.serializers import TakeSerializer, parse_take

CASES = [
    {"worker": "w"},
    {"worker": " w ", "count": 3},
    {"worker": "w", "complete": [{"id": 1, "token": 2}]},
    {"worker": "w", "complete": [{"id": 1, "token": 2, "records": 0}, {"id": 5, "token": 9, "records": None}]},
    {},
    {"worker": ""},
    {"worker": "   "},
    {"worker": "w\x00"},
    {"worker": "x" * 256},
    {"worker": "w", "count": 0},
    {"worker": "w", "count": 1001},
    {"worker": "w", "count": 2.5},
    {"worker": "w", "count": True},
    {"worker": "w", "complete": {}},
    {"worker": "w", "complete": [5]},
    {"worker": "w", "complete": [{"id": 1}]},
    {"worker": "w", "complete": [{"id": 0, "token": 1}]},
    {"worker": "w", "complete": [{"id": 1, "token": 2**63}]},
    {"worker": "w", "complete": [{"id": 1, "token": 2, "records": -1}]},
    {"worker": "w", "complete": [{"id": 1, "token": 2, "extra": 1}]},
    {"worker": "w", "colour": "blue"},
    {"worker": "w", "consumer": "main"},
    {"worker": "w", "consumer": " main "},
    {"worker": "w", "consumer": ""},
    {"worker": "w", "consumer": "c" * 256},
    [],
]


def serializer_answer(data):
    serializer = TakeSerializer(data=data)
    if not serializer.is_valid():
        return None
    value = serializer.validated_data
    return {
        "worker": value["worker"],
        "consumer": value.get("consumer", value["worker"]),
        "count": value["count"],
        "complete": [{"id": c["id"], "token": c["token"], "records": c["records"]} for c in value["complete"]],
    }


def parse_answer(data):
    try:
        return parse_take(data)
    except serializers.ValidationError:
        return None


# DRF would coerce these (5 -> "5", "3" -> 3); the hot path takes JSON types as they are.
COERCED = [
    {"worker": 5},
    {"worker": "w", "count": "3"},
    {"worker": "w", "complete": [{"id": "1", "token": 2}]},
    {"worker": "w", "consumer": 5},
]


@pytest.mark.parametrize("data", COERCED, ids=[repr(c)[:40] for c in COERCED])
def test_the_hot_path_refuses_what_drf_would_coerce(data):
    assert serializer_answer(data) is not None
    assert parse_answer(data) is None


@pytest.mark.parametrize("data", CASES, ids=[repr(c)[:40] for c in CASES])
def test_both_accept_or_reject_alike(data, settings):
    settings.SHARDLINE_MAX_TAKE = 1000
    assert parse_answer(data) == serializer_answer(data)
