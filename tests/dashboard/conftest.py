import uuid

import pytest
from django.test import Client

from server.services import accounts


@pytest.fixture
def browser_for(db):
    """``browser_for(role)``: a Django test client logged in as a new user of that role."""

    def build(role: str, enforce_csrf: bool = False) -> Client:
        user, _ = accounts.ensure_user(f"{role}-{uuid.uuid4().hex[:6]}", role)
        client = Client(enforce_csrf_checks=enforce_csrf)
        client.force_login(user)
        return client

    return build
