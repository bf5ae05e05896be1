"""Fixtures of the accounts tests: a user who manages their tokens, and another user."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.factories import make_user


@pytest.fixture
def ada(db):
    return make_user("ada")


@pytest.fixture
def bob(db):
    return make_user("bob")


@pytest.fixture
def session_api(ada) -> APIClient:
    """ada's API client, signed in with a session (so that no token of hers exists before the test makes one)."""
    client = APIClient()
    client.force_login(ada)
    return client


def key_client(key: str, scheme: str = "Token") -> APIClient:
    """An API client that sends ``key`` in ``scheme``."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
    return client
