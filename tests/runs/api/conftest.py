"""Fixtures of the API tests: API clients logged in with a token, one with no credentials, and a run waiting for a
reviewer (the reviewer, outsider and their clients are in tests/conftest.py)."""

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
def start_suspended(reviewer_client, drain_runs):
    """Start a reimbursement run through the API and run it until it waits for a reviewer; returns its JSON."""

    def start(run_id: str, expense_id: str = "exp-1042") -> dict:
        response = reviewer_client.post(
            "/api/runs/",
            {"agent": "reimbursement", "run_id": run_id,
             "messages": [{"role": "user", "content": f"Please reimburse {expense_id}."}]},
            format="json",
        )
        assert response.status_code == 201, response.content
        drain_runs()
        run = reviewer_client.get(f"/api/runs/{run_id}/").json()
        assert run["status"] == "suspended", run
        return run

    return start
