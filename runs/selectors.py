"""Reads for runs: one run with everything people look at, lists, checkpoint history."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import QuerySet

from runs.errors import RunNotFound
from runs.models import Checkpoint, Leg, Run
from runs.runtime.codec import decode_value
from runs.runtime.types import AgentCheckpoint
from runs.stores.db import DatabaseSessionStore

__all__ = [
    "run_checkpoint_list",
    "run_effect_list",
    "run_get",
    "run_input_messages",
    "run_leg_list",
    "run_list",
    "run_pending_approval_list",
]


def run_get(*, run_id: str) -> Run:
    try:
        return Run.objects.select_related("created_by").get(run_id=run_id)
    except Run.DoesNotExist:
        raise RunNotFound(run_id) from None


def run_list(*, status: str | None = None, agent: str | None = None) -> QuerySet[Run]:
    """Runs, newest first, optionally filtered."""
    runs = Run.objects.order_by("-created_at", "-id")
    if status:
        runs = runs.filter(status=status)
    if agent:
        runs = runs.filter(agent=agent)
    return runs


def run_input_messages(run: Run) -> list[dict[str, Any]]:
    return decode_value(json.loads(run.input_messages))


def run_checkpoint_list(*, run: Run, include_sub_agents: bool = False) -> list[AgentCheckpoint]:
    """Every stored checkpoint of the run, oldest first, as AgentCheckpoint dicts (time travel)."""
    rows = Checkpoint.objects.filter(run=run).order_by("id")
    if not include_sub_agents:
        rows = rows.filter(session_key=run.run_id)
    store = DatabaseSessionStore()
    return [store.checkpoint_from_row(row) for row in rows]


def run_pending_approval_list(*, run: Run) -> list[dict[str, Any]]:
    """The ToolApprovalRequest dicts (with tokens) the run waits on now."""
    from approvals.models import ApprovalRequest

    pending = ApprovalRequest.objects.filter(run=run, status=ApprovalRequest.Status.PENDING).order_by("id")
    return [request.as_request() for request in pending]


def run_leg_list(*, run: Run) -> QuerySet[Leg]:
    return run.legs.order_by("number")


def run_effect_list(*, run: Run) -> list[dict[str, Any]]:
    """The run's side effects from the effect ledger, oldest first."""
    return [
        {
            "operation_id": effect.operation_id,
            "tool_call_id": effect.tool_call_id,
            "tool_name": effect.tool_name,
            "status": effect.status,
            "receipt": effect.receipt,
        }
        for effect in run.effects.order_by("id")
    ]
