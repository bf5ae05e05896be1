"""The recovery receipt of a run (`runs export`, the API): what it did, who decided and cancelled, which legs were
interrupted (and when that was detected), and why each effect happened once. It never holds a bearer token, only
the token's digest."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.selectors import approval_run_list
from runs.models import Checkpoint, Effect, Run
from runs.presenters.leg_ends import LegEnd, interruption_text, run_leg_ends
from runs.presenters.plain_text import message_text
from runs.presenters.state import run_people_state
from runs.selectors import run_checkpoint_rows, run_effect_rows, run_latest_messages, run_leg_list

__all__ = ["RECEIPT_VERSION", "run_final_text", "run_receipt"]

RECEIPT_VERSION = 1


def run_receipt(run: Run) -> dict[str, Any]:
    """The recovery receipt: what the run did and why an effect happened once, with no bearer tokens."""
    state = run_people_state(run)
    return {
        "receipt_version": RECEIPT_VERSION,
        "generated_at": _iso(timezone.now()),
        "run": _run_record(run),
        "legs": [_leg_record(end, run) for end in run_leg_ends(run, list(run_leg_list(run=run)))],
        "checkpoints": [_checkpoint_record(row) for row in run_checkpoint_rows(run=run)],
        "approvals": [_approval_record(request) for request in approval_run_list(run=run)],
        "effects": [_effect_record(effect) for effect in run_effect_rows(run=run)],
        "state": {"key": state.key, "label": state.label, "why": state.why},
        "final_text": run_final_text(run),
    }


def _run_record(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "agent": run.agent,
        "status": run.status,
        "status_label": run.get_status_display(),
        "step_index": run.step_index,
        "usage": run.usage,
        "finish_reason": run.finish_reason,
        "error": run.error,
        "owner_epoch": run.owner_epoch,
        "cancel_requested": run.cancel_requested,
        "created_by": run.created_by.get_username() if run.created_by else None,
        "cancelled_by": run.cancelled_by.get_username() if run.cancelled_by else None,
        "cancelled_at": _iso(run.cancelled_at),
        "created_at": _iso(run.created_at),
        "updated_at": _iso(run.updated_at),
        "forked_from": None if not run.is_fork else {
            "run_id": run.forked_from.run_id if run.forked_from is not None else None,
            "step_index": run.forked_from_step,
        },
    }


def _leg_record(end: LegEnd, run: Run) -> dict[str, Any]:
    """A leg as stored, with how it ended (runs.presenters.leg_ends): a leg whose worker died has its
    ``interruption``, as the API's legs do."""
    leg = end.leg
    return {
        "number": leg.number,
        "kind": leg.kind,
        "owner_epoch": leg.owner_epoch,
        "worker_id": leg.worker_id,
        "started_at": _iso(leg.started_at),
        "ended_at": _iso(leg.ended_at),
        "finish_reason": leg.finish_reason,
        "usage": leg.usage,
        "error": leg.error,
        "state": end.state,
        "interruption": None if not end.is_interrupted else {
            "last_seen_at": _iso(end.last_seen_at),
            "detected_at": _iso(end.detected_at),
            "last_step": end.last_step,
            "gap_seconds": end.gap_seconds,
            "next_leg": end.next_leg_number,
            "text": interruption_text(end, run),
        },
    }


def _checkpoint_record(row: Checkpoint) -> dict[str, Any]:
    return {
        "step_id": row.step_id,
        "status": row.status,
        "owner_epoch": row.owner_epoch,
        "recorded_at": _iso(row.recorded_at),
        "message_count": row.message_count,
        "agent_path": list(row.agent_path or []),
    }


def _approval_record(request: ApprovalRequest) -> dict[str, Any]:
    return {
        "approval_id": request.approval_id,
        "tool_call_id": request.tool_call_id,
        "tool_name": request.tool_name,
        "input": request.tool_input,
        "agent_path": list(request.agent_path or []),
        "revision": request.revision.step_id if request.revision else None,
        "status": request.status,
        "issued_at": _iso(request.issued_at),
        "expires_at": _iso(request.expires_at),
        "decided_by": request.decided_by.get_username() if request.decided_by else None,
        "decided_at": _iso(request.decided_at),
        "reason": request.reason,
        # Edit, then approve: the input the call ran with instead, and who edited it (the approver).
        "edited_input": request.edited_input,
        "edited_by": (request.decided_by.get_username() if request.decided_by else None) if request.is_edited else None,
        "edited_token_sha256": hashlib.sha256(request.edited_token.encode()).hexdigest() if request.edited_token else None,
        # The token is a bearer credential: its digest identifies it without granting anything.
        "token_sha256": hashlib.sha256(request.token.encode()).hexdigest() if request.token else None,
    }


def _effect_record(effect: Effect) -> dict[str, Any]:
    return {
        "operation_id": effect.operation_id,
        "tool_call_id": effect.tool_call_id,
        "tool_name": effect.tool_name,
        "request_fingerprint": effect.fingerprint,
        "request": effect.request,
        "status": effect.status,
        "attempts": effect.attempts,
        "owner_epoch": effect.owner_epoch,
        "receipt": effect.receipt,
        "outcome_source": effect.outcome_source,
        "approval": effect.approval,
        "error": effect.error,
        "created_at": _iso(effect.created_at),
        "updated_at": _iso(effect.updated_at),
        # The ordered ledger: why the effect happened once (attempts, reconciliation reads, epochs, people).
        "transitions": [
            {"from": t.from_status, "to": t.to_status, "owner_epoch": t.owner_epoch,
             "actor": f"{t.actor_kind} {t.actor}", "via": t.via, "note": t.note, "evidence": t.evidence,
             "at": _iso(t.at)}
            for t in effect.transitions.order_by("id")
        ],
    }


def run_final_text(run: Run) -> str | None:
    """The last assistant text of the run's latest history."""
    for message in reversed(run_latest_messages(run=run)):
        if message.get("role") == "assistant" and message_text(message):
            return message_text(message)
    return None


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
