"""A run's story for people: its semantic steps in order (proposed, approved, attempted, reconciled,
verified, cancelled...) and everything the run's timeline page shows, read together."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from approvals.models import ApprovalRequest
from approvals.selectors import approval_run_list
from runs.models import Checkpoint, Effect, Leg, Run
from runs.presenters.state import PeopleState, run_people_state
from runs.selectors import run_checkpoint_rows, run_effect_rows, run_get, run_journal_count, run_leg_list

__all__ = ["RunPage", "RunStep", "run_page_get", "run_step_list"]


@dataclass(frozen=True)
class RunStep:
    """One semantic step of a run's timeline: proposed, approved (or denied, expired...), attempted, reconciled,
    verified, or the run's end."""

    kind: str
    title: str
    detail: str
    at: datetime | None


def run_step_list(*, run: Run) -> list[RunStep]:
    """The run's semantic steps in order, from its approval requests, effects and checkpoints."""
    steps: list[RunStep] = []
    requests = approval_run_list(run=run)
    effects = {effect.tool_call_id: effect for effect in run_effect_rows(run=run)}
    verdict_kinds = {
        ApprovalRequest.Status.APPROVED: "approved", ApprovalRequest.Status.USED: "approved",
        ApprovalRequest.Status.DENIED: "denied", ApprovalRequest.Status.EXPIRED: "expired",
        ApprovalRequest.Status.SUPERSEDED: "superseded", ApprovalRequest.Status.CANCELLED: "withdrawn",
    }
    seen: set[str] = set()
    for request in requests:
        steps.append(RunStep("proposed", f"Proposed: {request.tool_name}",
                             f"at step {request.revision.step_index}, waiting for a reviewer", request.issued_at))
        kind = verdict_kinds.get(request.status)
        if kind is not None:
            who = request.decided_by.get_username() if request.decided_by else "the system"
            detail = f"by {who}" if kind in {"approved", "denied"} else "no verdict was given in time"
            if kind == "superseded":
                detail = "a newer revision replaced this request"
            elif kind == "withdrawn":
                detail = f"the run was cancelled by {who}"
            if request.reason:
                detail += f": {request.reason}"
            steps.append(RunStep(kind, f"{kind.capitalize()}: {request.tool_name}", detail,
                                 request.decided_at or request.expires_at))
        effect = effects.get(request.tool_call_id)
        if effect is not None:
            seen.add(effect.tool_call_id)
            steps.extend(_effect_steps(effect))
    for effect in effects.values():
        if effect.tool_call_id not in seen:
            steps.extend(_effect_steps(effect))
    if run.cancelled_at is not None:
        who = run.cancelled_by.get_username() if run.cancelled_by else "an operator"
        steps.append(RunStep("cancel_requested", "Cancel requested", f"by {who}", run.cancelled_at))
    if run.is_terminal or run.status == Run.Status.NEEDS_REVIEW:
        steps.append(RunStep(run.status, run.get_status_display(), run.finish_reason or run.error, run.updated_at))
    return _in_time_order(steps)


def _in_time_order(steps: list[RunStep]) -> list[RunStep]:
    """The steps in the order things happened; a step without a time keeps its place after the one before it."""
    keyed, last = [], datetime.min.replace(tzinfo=UTC)
    for index, step in enumerate(steps):
        last = step.at or last
        keyed.append((last, index, step))
    return [step for _, _, step in sorted(keyed, key=lambda item: item[:2])]


def _effect_steps(effect: Effect) -> list[RunStep]:
    attempts = f"{effect.attempts} attempt{'s' if effect.attempts != 1 else ''}"
    steps = [RunStep("attempted", f"Attempted: {effect.tool_name}",
                     f"operation {effect.operation_id}, {attempts}", effect.created_at)]
    if effect.is_reconciled:
        steps.append(RunStep("reconciled", f"Reconciled: {effect.tool_name}",
                             "the outcome was read back from the provider", effect.updated_at))
    if effect.status == Effect.Status.NEEDS_REVIEW:
        steps.append(RunStep("needs_review", f"Needs review: {effect.tool_name}",
                             "its outcome cannot be established; a reviewer resolves it", effect.updated_at))
    if effect.status in {Effect.Status.COMMITTED, Effect.Status.VERIFIED} and effect.receipt:
        receipt = effect.receipt if isinstance(effect.receipt, dict) else {}
        reference = receipt.get("transaction_id") or effect.operation_id
        kind = "verified" if effect.status == Effect.Status.VERIFIED else "committed"
        steps.append(RunStep(kind, f"{kind.capitalize()}: {effect.tool_name}", f"receipt {reference}",
                             effect.updated_at))
    elif effect.status == Effect.Status.UNKNOWN:
        steps.append(RunStep("reconciling", f"Outcome unknown: {effect.tool_name}",
                             "the system is checking the provider before anything is retried", effect.updated_at))
    elif effect.status == Effect.Status.FAILED:
        steps.append(RunStep("failed", f"Failed: {effect.tool_name}", effect.error, effect.updated_at))
    return steps


@dataclass(frozen=True)
class RunPage:
    """Everything the run's timeline page shows, read together."""

    run: Run
    state: PeopleState
    steps: list[RunStep]
    legs: list[Leg]
    effects: list[tuple[Effect, str]]  # each with its receipt as formatted JSON ("" when none)
    checkpoints: list[Checkpoint]
    journal_count: int


def run_page_get(*, run_id: str) -> RunPage:
    """One run with its people-facing state, semantic steps, legs, effects and technical records."""
    run = run_get(run_id=run_id)
    legs = list(run_leg_list(run=run))
    effects = list(run_effect_rows(run=run))
    return RunPage(
        run=run,
        state=run_people_state(run, legs=legs, effects=effects),
        steps=run_step_list(run=run),
        legs=legs,
        effects=[(effect, _pretty_json(effect.receipt) if effect.receipt else "") for effect in effects],
        checkpoints=list(run_checkpoint_rows(run=run)),
        journal_count=run_journal_count(run=run),
    )


def _pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)
