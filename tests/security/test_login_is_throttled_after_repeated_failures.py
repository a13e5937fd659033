"""The dashboard's login form refuses a (username, address) pair after repeated failures.

Proves: after SHARDLINE_LOGIN_MAX_FAILURES wrong passwords, even the right
password is refused with a 429 and a message saying why and for how long;
the same user from another address is not affected; the refusal ends with
the window; a success clears the count.
"""

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.support import wait_until

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple 9"


@pytest.fixture
def user(settings):
    settings.SHARDLINE_LOGIN_MAX_FAILURES = 3
    settings.SHARDLINE_LOGIN_WINDOW_SECONDS = 60
    return get_user_model().objects.create_user(f"throttled-{uuid.uuid4().hex[:8]}", password=PASSWORD)


def login(user, password, address="10.0.0.1"):
    client = Client(REMOTE_ADDR=address)
    response = client.post("/accounts/login/", {"username": user.username, "password": password})
    return response, client


def test_repeated_failures_lock_the_pair_out_even_with_the_right_password(user):
    for _ in range(3):
        response, _ = login(user, "wrong")
        assert response.status_code == 200 and b"did not match" in response.content
    response, client = login(user, PASSWORD)
    assert response.status_code == 429
    assert b"Too many failed logins" in response.content
    assert "_auth_user_id" not in client.session
    # Another address is not affected (a guesser cannot lock the owner out from elsewhere).
    response, client = login(user, PASSWORD, address="10.0.0.2")
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(user.pk)


def test_the_refusal_ends_with_the_window(user, settings):
    # Long enough for three logins (password hashing takes a while on a busy
    # 2-core machine), short enough to wait out.
    settings.SHARDLINE_LOGIN_WINDOW_SECONDS = 5
    for _ in range(3):
        login(user, "wrong", address="10.0.0.3")
    assert login(user, PASSWORD, address="10.0.0.3")[0].status_code == 429
    wait_until(lambda: login(user, PASSWORD, address="10.0.0.3")[0].status_code == 302, 20, 0.2, "the window to end")


def test_a_success_clears_the_count(user):
    for _ in range(2):
        login(user, "wrong", address="10.0.0.4")
    assert login(user, PASSWORD, address="10.0.0.4")[0].status_code == 302
    for _ in range(2):
        login(user, "wrong", address="10.0.0.4")
    assert login(user, PASSWORD, address="10.0.0.4")[0].status_code == 302
