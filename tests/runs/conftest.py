"""Fixtures of the runs tests: API clients logged in with a token, and one with no credentials."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


@pytest.fixture
def token_client():
    """An APIClient that authenticates as ``user`` with `Authorization: Token KEY`, as API clients do."""

    def make(user) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
        return client

    return make


@pytest.fixture
def api_user(django_user_model):
    return django_user_model.objects.create_user(username="ada", password="not-used")


@pytest.fixture
def api_client(token_client, api_user) -> APIClient:
    """Logged in as a plain user: may start, read and cancel runs, not decide approvals."""
    return token_client(api_user)


@pytest.fixture
def anonymous_client() -> APIClient:
    return APIClient()


@pytest.fixture
def workers(tmp_path):
    """Start `manage.py worker` processes against the test database; all are stopped at the end."""
    from tests.runs.processes import WorkerProcess

    started = []

    def start(name: str, **env: str):
        worker = WorkerProcess(name, tmp_path, **env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
