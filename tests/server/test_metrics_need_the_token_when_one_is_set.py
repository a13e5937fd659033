"""SHARDLINE_METRICS_TOKEN set: /metrics answers 401 without `Authorization: Bearer <that token>`, as Prometheus's
`authorization` scrape setting sends it. Unset: /metrics is open (as /healthz is)."""

import pytest

pytestmark = pytest.mark.django_db

TOKEN = "metrics-secret-7f3a"


def test_metrics_are_open_without_a_token_setting(client, settings):
    settings.SHARDLINE_METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 200


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Token {TOKEN}", TOKEN, "Bearer é"],
)
def test_metrics_refuse_anything_but_the_bearer_token(client, settings, authorization):
    settings.SHARDLINE_METRICS_TOKEN = TOKEN
    headers = {} if authorization is None else {"HTTP_AUTHORIZATION": authorization}
    response = client.get("/metrics", **headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert TOKEN not in response.content.decode()
    assert b"shardline_" not in response.content


@pytest.mark.parametrize("scheme", ["Bearer", "bearer"])
def test_metrics_answer_the_bearer_token(client, settings, scheme):
    settings.SHARDLINE_METRICS_TOKEN = TOKEN
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"{scheme} {TOKEN}")
    assert response.status_code == 200
    assert b"shardline_" in response.content


def test_health_stays_open(client, settings):
    settings.SHARDLINE_METRICS_TOKEN = TOKEN
    assert client.get("/healthz").status_code == 200
