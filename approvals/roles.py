"""Who may decide approvals, and the roles (groups) the service ships with.

  support     reads every run (runs.view_every_run) and the admin's run records; decides nothing
  reviewers   all of support, plus deciding approvals and resolving effects that need review

A run's creator also decides its requests when its agent says so (AgentDefinition.approvals_decided_by "creator",
as a chat user answers their own assistant); for an agent whose approvals reviewers decide, the creator decides only
if a reviewer. A forked run's approvals are decided by reviewers whatever its agent says.

The groups are created by migration approvals.0002_roles; approval tokens are shown only to users who
may decide (they are bearer credentials for the call).
"""

from __future__ import annotations

from typing import Any

from runs.agents import agent_approvals_decided_by

__all__ = [
    "DECIDE_APPROVALS", "NOT_DECIDABLE", "REVIEWERS_GROUP", "ROLE_PERMISSIONS", "SUPPORT_GROUP",
    "approval_is_decidable_by",
]

DECIDE_APPROVALS = "approvals.decide_approvalrequest"
SUPPORT_GROUP = "support"
REVIEWERS_GROUP = "reviewers"
#: Why a user may not decide a request.
NOT_DECIDABLE = (f"Deciding this request needs the reviewer permission ({DECIDE_APPROVALS}), or being the run's "
                 "creator when its agent lets its creator decide.")

_READ = [
    "runs.view_every_run",
    "runs.view_run",
    "runs.view_leg",
    "runs.view_checkpoint",
    "runs.view_effect",
    "runs.view_journalentry",
    "approvals.view_approvalrequest",
]

#: Each role's permissions as "app_label.codename".
ROLE_PERMISSIONS: dict[str, list[str]] = {
    SUPPORT_GROUP: _READ,
    REVIEWERS_GROUP: [*_READ, DECIDE_APPROVALS, "runs.resolve_effect"],
}


def approval_is_decidable_by(*, user: Any, run: Any = None) -> bool:
    """True when ``user`` may approve or deny requests (and so may see their tokens): every run's for reviewers;
    with ``run``, also that run's when the user created it and its agent lets its creator decide."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    if user.has_perm(DECIDE_APPROVALS):
        return True
    # A fork's approvals go to reviewers whatever its agent says (its creator forked another's run).
    return (run is not None and run.created_by_id == user.pk and not run.is_fork
            and agent_approvals_decided_by(run.agent) == "creator")
