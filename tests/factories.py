"""Plain helpers that make the records tests start from: a run row, a run waiting for its payment's approval,
a paid run, users in each role. Each takes overrides; none hides an assertion."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.models import Run
from runs.services.lifecycle import run_start

__all__ = ["REIMBURSE", "make_paid_run", "make_run", "make_suspended_run", "make_user", "verdict"]

#: The demo reimbursement agent's request: it looks the expense up, then asks to pay it.
REIMBURSE = [{"role": "user", "content": "Reimburse exp-1042"}]


def make_run(run_id: str = "r1", **overrides: Any) -> Run:
    """A bare run row (no leg has run), e.g. to fence stores against."""
    fields = {"agent": "reimbursement", "input_messages": "[]", "status": Run.Status.RUNNING, **overrides}
    return Run.objects.create(run_id=run_id, **fields)


def make_suspended_run(drain_runs, run_id: str = "r1", *, user=None, messages=None) -> ApprovalRequest:
    """A reimbursement run that ran to its payment and waits for a reviewer; returns the pending request."""
    run_start(agent="reimbursement", messages=messages or REIMBURSE, run_id=run_id, user=user)
    drain_runs()
    return ApprovalRequest.objects.select_related("run").get(run__run_id=run_id, status=ApprovalRequest.Status.PENDING)


def verdict(request: ApprovalRequest, *, approved: bool = True, user=None, **overrides: Any) -> ApprovalRequest:
    """Record a verdict on ``request`` with its own token, as the console does."""
    options = dict(run_id=request.run.run_id, approval_id=request.approval_id, approved=approved,
                   token=request.token, user=user)
    return approval_decide(**{**options, **overrides})


def make_paid_run(drain_runs, run_id: str = "r-paid", **options: Any) -> Run:
    """A reimbursement run whose payment was approved and made."""
    verdict(make_suspended_run(drain_runs, run_id, **options))
    drain_runs()
    return Run.objects.get(run_id=run_id)


def make_user(username: str, *groups: str, **fields: Any):
    """A user in ``groups`` (``support``, ``reviewers``: created by migrations)."""
    user = get_user_model().objects.create_user(username=username, password="not-used", **fields)
    user.groups.add(*Group.objects.filter(name__in=groups))
    return user
