"""The login throttle counts a user name as it picks an account, and an address over all names.

Proves: after SHARDLINE_LOGIN_MAX_FAILURES failures for ``vuser``, the
spellings Django normalises to the same account (``ｖuser`` fullwidth,
``𝐯user`` mathematical bold, ``VUSER``) get no more guesses; and one address
that spreads guesses over many names is refused after
SHARDLINE_LOGIN_MAX_FAILURES_PER_ADDRESS, for every name, the right password
included, while other addresses are not.
"""

import random
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple 9"


def fresh_address() -> str:
    # The throttle's counts live in a cache shared with other runs: an address of this test's own.
    return f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"


@pytest.fixture
def address() -> str:
    return fresh_address()


@pytest.fixture
def user(settings):
    settings.SHARDLINE_LOGIN_MAX_FAILURES = 3
    settings.SHARDLINE_LOGIN_MAX_FAILURES_PER_ADDRESS = 6
    settings.SHARDLINE_LOGIN_WINDOW_SECONDS = 60
    return get_user_model().objects.create_user(f"vuser{uuid.uuid4().hex[:6]}", password=PASSWORD)


def login(username, password, address):
    client = Client(REMOTE_ADDR=address)
    return client.post("/accounts/login/", {"username": username, "password": password}), client


def test_spellings_of_one_name_share_its_budget(user, address):
    for _ in range(3):
        assert login(user.username, "wrong", address)[0].status_code == 200
    suffix = user.username[1:]
    for spelling in ("\uff56" + suffix, "\U0001d42f" + suffix, user.username.upper()):
        response, _ = login(spelling, "wrong", address)
        assert response.status_code == 429, spelling
        assert b"for this user name" in response.content
    # Django itself takes the fullwidth spelling for the same account: the throttle counts what it matches.
    assert get_user_model().normalize_username("\uff56" + suffix) == user.username


def test_one_address_guessing_many_names_is_refused_for_every_name(user, address):
    for index in range(6):
        assert login(f"nobody-{index}-{uuid.uuid4().hex[:4]}", "wrong", address)[0].status_code == 200
    response, client = login(user.username, PASSWORD, address)
    assert response.status_code == 429
    assert b"from your address" in response.content
    assert "_auth_user_id" not in client.session
    # Another address signs in as usual.
    response, client = login(user.username, PASSWORD, fresh_address())
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(user.pk)


def test_a_success_does_not_reset_the_address_budget(user, address):
    for index in range(5):
        login(f"nobody-{index}-{uuid.uuid4().hex[:4]}", "wrong", address)
    assert login(user.username, PASSWORD, address)[0].status_code == 302
    login("nobody-last", "wrong", address)
    assert login(user.username, PASSWORD, address)[0].status_code == 429
