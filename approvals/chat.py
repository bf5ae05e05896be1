"""Verdicts given from a chat (SERVICE.md, "The AI SDK chat wire"): ``addToolApprovalResponse`` makes the next chat
POST carry the answer, and the approval is decided as the signed-in user, who needs no token (the UI message stream
carries none) but must be one who may decide it (approvals.roles). A user who may not is refused before anything is
decided.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractUser
from django.core.exceptions import PermissionDenied

from approvals.errors import ApprovalNotDecidable, ApprovalNotFound
from approvals.models import ApprovalRequest
from approvals.roles import approval_refusal
from approvals.services import approval_decide
from runs.models import Run, Thread
from runs.selectors import thread_latest_turn
from runs.stores import get_store

__all__ = ["ChatVerdict", "chat_verdicts_decide"]


@dataclass(frozen=True, kw_only=True)
class ChatVerdict:
    """One tool part's answer: ``approval: {id, approved, reason?}``."""

    approval_id: str
    approved: bool
    reason: str = ""


def chat_verdicts_decide(*, thread: Thread, verdicts: list[ChatVerdict], user: AbstractUser) -> tuple[Run, int]:
    """Decide, as ``user``, the pending approvals of the thread's latest turn that ``verdicts`` name; answers the
    turn's run and the last seq of its journal before the verdicts, where the answer's stream goes on from.

    An approval already decided is skipped (the client's message still shows it responded until its result comes),
    but when none is pending the first one's state is ApprovalNotDecidable. ApprovalNotFound for an approval that
    is not the latest turn's; PermissionDenied, with nothing decided, for a user who may not decide them."""
    run = thread_latest_turn(thread=thread)
    if run is None:
        raise ApprovalNotFound(thread.thread_id, verdicts[0].approval_id)
    requests = {request.approval_id: request for request in
                ApprovalRequest.objects.filter(run=run, approval_id__in=[verdict.approval_id for verdict in verdicts])}
    for verdict in verdicts:
        if verdict.approval_id not in requests:
            raise ApprovalNotFound(run.run_id, verdict.approval_id)
    refusal = approval_refusal(user=user, run=run)  # why not, four eyes included
    if refusal is not None:
        raise PermissionDenied(refusal)
    pending = [verdict for verdict in verdicts if requests[verdict.approval_id].status == ApprovalRequest.Status.PENDING]
    if not pending:
        request = requests[verdicts[0].approval_id]
        raise ApprovalNotDecidable(f"This request is {request.get_status_display().lower()}.", status=request.status)
    # Read before deciding: the resume leg a verdict queues appends after it, and none writes while it is suspended.
    cursor = get_store("streams").last_seq(run.run_id)
    for verdict in pending:
        approval_decide(run_id=run.run_id, approval_id=verdict.approval_id, approved=verdict.approved,
                        token=requests[verdict.approval_id].token, reason=verdict.reason, user=user)
    return run, cursor
