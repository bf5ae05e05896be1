"""Fixtures of the page tests: one user per role, each with a signed-in browser, and runs in known states."""

from __future__ import annotations

import pytest
from django.test import Client

from approvals.roles import REVIEWERS_GROUP, SUPPORT_GROUP
from approvals.models import ApprovalRequest
from approvals.services import approval_decide, role_group_ensure
from runs.services.lifecycle import run_start

#: Every role the pages know, as fixture names (the authorization matrix walks them all).
ROLES = ["anonymous", "plain", "owner", "support", "reviewer", "staff", "superuser"]


@pytest.fixture
def users(django_user_model) -> dict:
    """One user per role: plain (signed in, no group), owner (started the runs below), support, reviewer,
    staff (the admin, no group) and superuser."""
    make = django_user_model.objects.create_user
    found = {
        "plain": make("pat", password="not-used"),
        "owner": make("olga", password="not-used"),
        "support": make("sue", password="not-used", is_staff=True),
        "reviewer": make("rita", password="not-used", is_staff=True),
        "staff": make("stan", password="not-used", is_staff=True),
        "superuser": django_user_model.objects.create_superuser("root", password="not-used"),
    }
    found["support"].groups.add(role_group_ensure(SUPPORT_GROUP))
    found["reviewer"].groups.add(role_group_ensure(REVIEWERS_GROUP))
    return found


@pytest.fixture
def browser_for(users):
    """A Django test client signed in as the role's user (none for "anonymous")."""

    def make(role: str, **options) -> Client:
        client = Client(**options)
        if role != "anonymous":
            client.force_login(users[role])
        return client

    return make


@pytest.fixture
def start(users):
    """Start a run of ``agent`` as the owner (or ``user``)."""

    def start_run(run_id: str, *, agent: str = "reimbursement", text: str = "Reimburse exp-1042", user=None):
        return run_start(agent=agent, messages=[{"role": "user", "content": text}], run_id=run_id,
                         user=users["owner"] if user is None else user)

    return start_run


@pytest.fixture
def suspended(start, drain_runs) -> ApprovalRequest:
    """The owner's reimbursement run r1, waiting for its payment's approval."""
    start("r1")
    drain_runs()
    return ApprovalRequest.objects.get(run__run_id="r1")


@pytest.fixture
def decide(users, drain_runs):
    """Record a verdict on ``request`` as the reviewer, then run the run to its end."""

    def record(request: ApprovalRequest, *, approved: bool, reason: str = "", run: bool = True) -> None:
        approval_decide(run_id=request.run.run_id, approval_id=request.approval_id, approved=approved,
                        token=request.token, reason=reason, user=users["reviewer"])
        if run:
            drain_runs()

    return record
