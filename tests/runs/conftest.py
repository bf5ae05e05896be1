"""Fixtures of the runs tests: API clients logged in with a token and one with no credentials, reimbursement runs
driven in this process up to a payment or a needed review, and real worker processes (the reviewer, outsider and
their clients are in tests/conftest.py)."""

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



def reimburse(run_id: str, agent: str = "reimbursement"):
    from runs.services.lifecycle import run_start

    text = "Reimburse exp-1042" if agent == "reimbursement" else "Fix the failing test"
    return run_start(agent=agent, messages=[{"role": "user", "content": text}], run_id=run_id)


def approve_pending(run_id: str) -> None:
    from approvals.models import ApprovalRequest
    from approvals.services import approval_decide

    for request in ApprovalRequest.objects.filter(run__run_id=run_id, status=ApprovalRequest.Status.PENDING):
        approval_decide(run_id=run_id, approval_id=request.approval_id, approved=True, token=request.token, user=None)


@pytest.fixture
def approved_run(drain_runs):
    """A reimbursement run suspended on its payment and approved: its next leg pays."""
    from runs.models import Run

    def make(run_id: str = "r-pay", agent: str = "reimbursement") -> Run:
        reimburse(run_id, agent)
        drain_runs()
        approve_pending(run_id)
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


@pytest.fixture
def workers(tmp_path):
    """Start `manage.py worker` processes against the test database; all are stopped at the end."""
    from tests.processes import WorkerProcess

    started = []

    def start(name: str, **env: str):
        worker = WorkerProcess(name, tmp_path, **env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
