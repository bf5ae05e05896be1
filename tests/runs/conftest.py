"""Fixtures of the runs tests: a plain user, their API token and client, a client with no credentials, the user who
starts runs, reimbursement runs driven in this process up to a payment or a needed review, and real worker
processes (token_client, the reviewer, outsider and their clients are in tests/conftest.py)."""

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
def owner(db):
    """A user with no group, who starts the runs a test reads or follows."""
    from tests.factories import make_user

    return make_user("olga")


@pytest.fixture
def approved_run(drain_runs):
    """A reimbursement run suspended on its payment and approved: its next leg pays."""
    from runs.models import Run
    from tests.factories import make_suspended_run, verdict

    def make(run_id: str = "r-pay") -> Run:
        verdict(make_suspended_run(drain_runs, run_id))
        return Run.objects.get(run_id=run_id)

    return make


@pytest.fixture
def needs_review_run(approved_run, drain_runs, monkeypatch):
    """A run whose payment committed, timed out, and could not be read back: it needs review."""
    from runs.models import Run

    def make(run_id: str = "r-review") -> Run:
        approved_run(run_id)
        monkeypatch.setenv("DEUZ_SANDBOX_PAYMENTS", "commit-then-timeout,reads-unavailable")
        drain_runs()
        monkeypatch.delenv("DEUZ_SANDBOX_PAYMENTS")
        run = Run.objects.get(run_id=run_id)
        assert run.status == Run.Status.NEEDS_REVIEW, run.error
        return run

    return make
