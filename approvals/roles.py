"""Who may decide approvals, and the roles (groups) the service ships with.

  support     reads every run (runs.view_every_run) and the admin's run records; decides nothing
  reviewers   all of support, plus deciding approvals and resolving effects that need review

The groups are created by migration approvals.0002_roles; approval tokens are shown only to users who
may decide (they are bearer credentials for the call).
"""

from __future__ import annotations

from typing import Any

__all__ = ["DECIDE_APPROVALS", "REVIEWERS_GROUP", "ROLE_PERMISSIONS", "SUPPORT_GROUP", "approval_is_decidable_by"]

DECIDE_APPROVALS = "approvals.decide_approvalrequest"
SUPPORT_GROUP = "support"
REVIEWERS_GROUP = "reviewers"

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


def approval_is_decidable_by(*, user: Any) -> bool:
    """True when ``user`` may approve or deny requests (and so may see their tokens)."""
    return user is not None and user.is_authenticated and user.is_active and user.has_perm(DECIDE_APPROVALS)
