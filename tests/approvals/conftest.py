"""Fixtures of the approvals tests: a reviewer, an outsider without the permission, and a suspended run."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from approvals.services import reviewers_group_ensure


def _token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def reviewer(django_user_model):
    user = django_user_model.objects.create_user(username="rita", password="not-used")
    user.groups.add(reviewers_group_ensure())
    return user


@pytest.fixture
def outsider(django_user_model):
    """Logged in, but not in the reviewers group."""
    return django_user_model.objects.create_user(username="oscar", password="not-used")


@pytest.fixture
def reviewer_client(reviewer) -> APIClient:
    return _token_client(reviewer)


@pytest.fixture
def outsider_client(outsider) -> APIClient:
    return _token_client(outsider)


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
