"""Who may decide approvals, and the roles (groups) the service ships with.

  support     reads every run (runs.view_every_run) and the admin's run records; decides nothing
  reviewers   all of support, plus deciding approvals and resolving effects that need review

Who decides a run's requests is run_approvals_decided_by's one answer (SERVICE.md, approvals_decided_by):
  "creator"    the run's creator (as a chat user answers their own assistant), and reviewers and superusers
  "reviewers"  reviewers and superusers, never the run's own creator (four eyes), unless DEUZ_FOUR_EYES=0
A forked run's approvals are decided by reviewers whatever its agent says.

The groups are created by migration approvals.0002_roles; approval tokens are shown only to users who
may decide (they are bearer credentials for the call).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from runs.agents import agent_approvals_decided_by

__all__ = [
    "DECIDE_APPROVALS", "FOUR_EYES", "NOT_DECIDABLE", "REVIEWERS_GROUP", "ROLE_PERMISSIONS", "SUPPORT_GROUP",
    "approval_is_decidable_by", "approval_refusal", "run_approvals_decided_by",
]

DECIDE_APPROVALS = "approvals.decide_approvalrequest"
SUPPORT_GROUP = "support"
REVIEWERS_GROUP = "reviewers"
#: Why a user may not decide a request.
NOT_DECIDABLE = (f"Deciding this request needs the reviewer permission ({DECIDE_APPROVALS}), or being the run's "
                 "creator when its agent lets its creator decide.")
#: Why the creator of a run that reviewers decide may not decide it, reviewer or not.
FOUR_EYES = ("Four eyes: you started this run, and its approvals are decided by reviewers other than the run's "
             "creator. Another reviewer must decide this request.")

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


def run_approvals_decided_by(run: Any) -> str:
    """Who decides ``run``'s approvals: "reviewers" or "creator" (its agent's approvals_decided_by); a fork's go to
    reviewers whatever its agent says (its creator forked another's run)."""
    if run.is_fork:
        return "reviewers"
    return agent_approvals_decided_by(run.agent)


def approval_refusal(*, user: Any, run: Any = None) -> str | None:
    """Why ``user`` may not approve or deny requests (nor see their tokens, which are bearer credentials for the
    call), or None when they may: every run's but their own reviewers-decided ones for reviewers (and every run's
    with DEUZ_FOUR_EYES=0); without ``run``, whether they decide any at all."""
    if user is None or not user.is_authenticated or not user.is_active:
        return NOT_DECIDABLE
    is_reviewer = user.has_perm(DECIDE_APPROVALS)
    if run is None:
        return None if is_reviewer else NOT_DECIDABLE
    is_creator = run.created_by_id is not None and run.created_by_id == user.pk
    if run_approvals_decided_by(run) == "creator":
        return None if is_creator or is_reviewer else NOT_DECIDABLE
    if not is_reviewer:
        return NOT_DECIDABLE
    return FOUR_EYES if is_creator and settings.DEUZ_FOUR_EYES else None


def approval_is_decidable_by(*, user: Any, run: Any = None) -> bool:
    """True when ``user`` may approve or deny ``run``'s requests, and so may see their tokens (approval_refusal);
    without ``run``, when they may decide some run's (a reviewer)."""
    return approval_refusal(user=user, run=run) is None
