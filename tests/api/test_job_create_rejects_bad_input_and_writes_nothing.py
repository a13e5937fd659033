import pytest

from server.models import Job, Unit

pytestmark = pytest.mark.django_db

GOOD = {"name": "good-name", "works": ["/a"]}


@pytest.mark.parametrize(
    "body, field",
    [
        ({"works": ["/a"]}, "name"),
        ({**GOOD, "name": ""}, "name"),
        ({**GOOD, "name": "has space"}, "name"),
        ({**GOOD, "name": "x" * 201}, "name"),
        ({**GOOD, "name": "slash/name"}, "name"),
        ({"name": "n"}, "works"),
        ({**GOOD, "works": []}, "works"),
        ({**GOOD, "works": "/a"}, "works"),
        ({**GOOD, "works": ["/a", ""]}, "works"),
        ({**GOOD, "works": ["/a", "   "]}, "works"),
        ({**GOOD, "works": ["/a", 3]}, "works"),
        ({**GOOD, "works": ["/a", None]}, "works"),
        ({**GOOD, "works": ["bad\x00path"]}, "works"),
        ({**GOOD, "works": ["x" * 5000]}, "works"),
        ({**GOOD, "num_epochs": 0}, "num_epochs"),
        ({**GOOD, "num_epochs": 10001}, "num_epochs"),
        ({**GOOD, "num_epochs": "two"}, "num_epochs"),
        ({**GOOD, "num_slices": 0}, "num_slices"),
        ({**GOOD, "lease_timeout": 0.5}, "lease_timeout"),
        ({**GOOD, "lease_timeout": 86401}, "lease_timeout"),
        ({**GOOD, "max_attempts": 0}, "max_attempts"),
        ({**GOOD, "max_attempts": 101}, "max_attempts"),
        ({**GOOD, "seed": -1}, "seed"),
        ({**GOOD, "seed": 2**64}, "seed"),
        ({**GOOD, "shuffle": "maybe"}, "shuffle"),
        ({**GOOD, "prefix": "a\x00b"}, "prefix"),
        ({**GOOD, "colour": "blue"}, "colour"),
        # Each field takes its documented JSON type only: no "3" for 3, 5 for "5", 1.0 for 1 or 1 for true.
        ({**GOOD, "num_epochs": "3"}, "num_epochs"),
        ({**GOOD, "num_epochs": 3.0}, "num_epochs"),
        ({**GOOD, "name": 5}, "name"),
        ({**GOOD, "seed": "7"}, "seed"),
        ({**GOOD, "shuffle": 1}, "shuffle"),
        ({**GOOD, "shuffle": "true"}, "shuffle"),
        ({**GOOD, "lease_timeout": "60"}, "lease_timeout"),
        ({**GOOD, "lease_timeout": 10**400}, "lease_timeout"),
        ({**GOOD, "prefix": 7}, "prefix"),
        ({**GOOD, "run": "has space"}, "run"),
        ({**GOOD, "run": "r/1"}, "run"),
        ({**GOOD, "run": 7}, "run"),
        ({**GOOD, "run": "r" * 101}, "run"),
        # NAME.RUN is the job's name: over 200 characters together is too long.
        ({**GOOD, "name": "n" * 150, "run": "r" * 50}, "run"),
        ({**GOOD, "name": "good-name\n"}, "name"),
        ({**GOOD, "name": " good-name"}, "name"),
        ({**GOOD, "works": [" " + "x" * 4096]}, "works"),
    ],
)
def test_bad_field_is_a_400_naming_it(worker_client, body, field):
    response = worker_client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400, response.content
    payload = response.json()
    assert payload["error"] == "invalid"
    assert field in payload["fields"]
    assert field in payload["message"]
    assert Job.objects.count() == 0 and Unit.objects.count() == 0


def test_works_beyond_the_configured_limit_are_refused(worker_client, settings):
    settings.SHARDLINE_MAX_WORKS = 5
    response = worker_client.post("/api/v1/jobs/", {"name": "big", "works": [f"/{i}" for i in range(6)]}, format="json")
    assert response.status_code == 400
    assert "limit of 5" in response.json()["message"]
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    "raw, content_type",
    [
        (b"{not json", "application/json"),
        (b'{"name": "x", "works": ["\xff\xfe"]}', "application/json"),
        (b'{"name": "x", "works": ["/a"], "seed": NaN}', "application/json"),
        (b"[1, 2, 3]", "application/json"),
        (b"name=x", "application/x-www-form-urlencoded"),
        (b"[" * 100 + b"]" * 100, "application/json"),
    ],
)
def test_malformed_bodies_are_a_4xx(worker_client, raw, content_type):
    response = worker_client.generic("POST", "/api/v1/jobs/", raw, content_type=content_type)
    assert 400 <= response.status_code < 500, response.content
    assert "message" in response.json()
    assert Job.objects.count() == 0


def test_oversized_body_is_refused(worker_client, settings):
    settings.SHARDLINE_MAX_BODY_BYTES = 2048
    response = worker_client.post("/api/v1/jobs/", {"name": "big", "works": ["/x" * 50] * 50}, format="json")
    assert response.status_code == 413
    assert "larger than 2048 bytes" in response.json()["message"]
