"""Fixtures of the API tests: a run started through the API waiting for a reviewer (the plain user and the API
clients are in tests/runs/conftest.py; token_client, the reviewer, outsider and their clients in
tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def start_suspended(api_client, reviewer_client, drain_runs):
    """Start a reimbursement run through the API as the plain user and run it until it waits for a reviewer;
    returns its JSON as the reviewer reads it (with its token: four eyes keeps it from the run's own creator)."""

    def start(run_id: str, expense_id: str = "exp-1042") -> dict:
        response = api_client.post(
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
