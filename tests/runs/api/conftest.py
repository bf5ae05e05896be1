"""Fixtures of the API tests: a plain user, their API token and client, a client with no credentials, and a run
waiting for a reviewer (token_client, the reviewer, outsider and their clients are in tests/conftest.py)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.factories import make_user, token_of


@pytest.fixture
def api_user(db):
    return make_user("ada")


@pytest.fixture
def api_token(api_user) -> str:
    """The plain user's API token key."""
    return token_of(api_user)


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
