"""Live pages, approvals' side: the console's Channels group, and the notification sent when a run's approval
requests change (recorded, decided, expired, withdrawn, used), once the change commits. Frames name what
changed, never its data (approvals.consumers passes them to open pages, which fetch themselves again).

  live.approvals    the reviewers' queue and request pages
"""

from __future__ import annotations

from functools import partial

from django.db import transaction

from runs.wire.live import live_send, run_live_group
from runs.models import Run

__all__ = ["APPROVALS_GROUP", "approvals_changed_on_commit"]

APPROVALS_GROUP = "live.approvals"


def approvals_changed_on_commit(*, run_pk: int) -> None:
    """Tell the console and the run's pages that the run's approval requests changed, once the current
    transaction commits."""
    transaction.on_commit(partial(_approvals_notify, run_pk))


def _approvals_notify(run_pk: int) -> None:
    row = Run.objects.filter(pk=run_pk).values("run_id", "status").first()
    if row is not None:
        live_send([APPROVALS_GROUP, run_live_group(row["run_id"])],
                  {"event": "approvals", "run_id": row["run_id"], "status": row["status"]})
