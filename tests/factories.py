"""Plain helpers that make the records tests start from: a run row, a started run, a run waiting for its payment's
approval, a paid run, users in each role and their API tokens. Each takes overrides; none hides an assertion."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from accounts.services import token_create
from approvals.models import ApprovalRequest
from approvals.services import approval_decide, role_group_ensure
from runs.models import Run
from runs.services.lifecycle import run_start

__all__ = [
    "FIX", "REIMBURSE", "make_paid_run", "make_queued_run", "make_run", "make_suspended_run", "make_user", "token_of",
    "verdict",
]

#: The demo reimbursement agent's request: it looks the expense up, then asks to pay it.
REIMBURSE = [{"role": "user", "content": "Reimburse exp-1042"}]
#: The demo coder's request: its sub-agent runs the tests in the sandbox, a shell command that needs approval.
FIX = [{"role": "user", "content": "Fix the failing test"}]


def make_run(run_id: str = "r1", **overrides: Any) -> Run:
    """A bare run row (no leg has run), e.g. to fence stores against."""
    fields = {"agent": "reimbursement", "input_messages": "[]", "status": Run.Status.RUNNING, **overrides}
    return Run.objects.create(run_id=run_id, **fields)


def make_queued_run(run_id: str = "r1", *, agent: str = "reimbursement", user=None, messages=None) -> Run:
    """A run started as the API starts it, asked what its demo agent is asked (REIMBURSE, FIX): no leg has run yet."""
    if messages is None:
        messages = FIX if agent == "coder" else REIMBURSE
    return run_start(agent=agent, messages=messages, run_id=run_id, user=user)


def make_suspended_run(drain_runs, run_id: str = "r1", *, user=None, messages=None) -> ApprovalRequest:
    """A reimbursement run that ran to its payment and waits for a reviewer; returns the pending request."""
    make_queued_run(run_id, user=user, messages=messages)
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


def make_user(username: str, *groups: str, password: str = "not-used", permissions: Iterable[str] = (),
              **fields: Any):
    """A user in the role groups ``groups`` (``support``, ``reviewers``; made again if a transactional test's flush
    removed them), given the ``permissions`` named by codename directly; ``fields`` (``is_staff``...) go to the user."""
    user = get_user_model().objects.create_user(username=username, password=password, **fields)
    user.groups.add(*(role_group_ensure(name) for name in groups))
    user.user_permissions.add(*(Permission.objects.get(codename=codename) for codename in permissions))
    return user


def token_of(user, name: str = "tests") -> str:
    """The key of a new API token of ``user`` (one more on each call: only the digest of a key is kept), for
    `Authorization: Token KEY`."""
    return token_create(user=user, name=name).key
