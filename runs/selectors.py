"""Reads for runs: one run with everything people look at, lists, checkpoint history."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from runs.errors import RunNotFound
from runs.models import Checkpoint, Effect, Leg, Run
from runs.runtime.codec import decode_value
from runs.runtime.types import AgentCheckpoint
from runs.stores.db import DatabaseSessionStore

__all__ = [
    "PeopleState",
    "RunPage",
    "RunStep",
    "run_checkpoint_list",
    "run_effect_list",
    "run_get",
    "run_input_messages",
    "run_leg_list",
    "run_list",
    "run_page_get",
    "run_pending_approval_list",
    "run_people_state",
    "run_step_list",
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


@dataclass(frozen=True)
class PeopleState:
    """The recovery state people see: its name, why, the last confirmed event, who acts now and what can be done."""

    key: str  # queued | running | waiting | retry_scheduled | reconciling | recovering | recovered | completed ...
    label: str
    why: str
    last_event: str
    last_event_at: datetime | None
    owner: str
    next_action: str


def _last_confirmed_event(run: Run, legs: list[Leg], effects: list[Effect]) -> tuple[str, datetime | None]:
    """The newest durable record of the run: a checkpoint, an effect's outcome, a verdict or a leg's end."""
    from approvals.models import ApprovalRequest

    events: list[tuple[datetime, str]] = []
    checkpoint = Checkpoint.objects.filter(run=run, session_key=run.run_id).order_by("-id").first()
    if checkpoint is not None:
        events.append((checkpoint.recorded_at, f"step {checkpoint.step_index} checkpointed ({checkpoint.status})"))
    for effect in effects:
        if effect.status != Effect.Status.INTENT:
            events.append((effect.updated_at, f"{effect.tool_name} {effect.get_status_display().lower()}"))
    verdict = (
        ApprovalRequest.objects.filter(run=run, decided_at__isnull=False).order_by("-decided_at").first()
    )
    if verdict is not None:
        events.append((verdict.decided_at, f"{verdict.tool_name} {verdict.get_status_display().lower()} by a reviewer"))
    for leg in legs:
        if leg.ended_at is not None:
            events.append((leg.ended_at, f"leg {leg.number} ended ({leg.finish_reason or 'no reason'})"))
    if not events:
        return "the run was queued", run.created_at
    moment, text = max(events, key=lambda event: event[0])
    return text, moment


def run_people_state(
    run: Run, *, legs: list[Leg] | None = None, effects: list[Effect] | None = None, include_last_event: bool = True
) -> PeopleState:
    """The people-facing recovery state of ``run`` (waiting, retry scheduled, reconciling, recovered...).

    Lists pass prefetched ``legs`` and ``effects`` and skip the last event, which costs two queries a run."""
    legs = list(run_leg_list(run=run)) if legs is None else legs
    effects = list(run.effects.order_by("id")) if effects is None else effects
    recovered = any(leg.kind == Leg.Kind.RECOVERY for leg in legs)
    is_unsettled = any(effect.status in {Effect.Status.INTENT, Effect.Status.UNKNOWN} for effect in effects)
    owner_now = f"worker {run.worker_id or '-'} (owner epoch {run.owner_epoch})"
    Status = Run.Status
    if run.status == Status.QUEUED:
        if not legs:
            key, label, why = "queued", "Queued", "The run waits for a worker to claim it."
        elif legs[-1].finish_reason == "suspended":
            key, label, why = "resuming", "Resuming after a verdict", "Every request has a verdict; a worker resumes it."
        else:
            key, label, why = "retry_scheduled", "Retry scheduled", "Its last leg stopped early; another leg is queued."
        owner, action = "No owner: waiting for a worker", "Follow it live; it can still be cancelled."
    elif run.status == Status.RUNNING:
        owner = owner_now
        if run.cancel_requested:
            key, label, why = "cancelling", "Cancelling", "A cancellation was requested; it stops at its next step."
            action = "None: the run is stopping."
        elif is_unsettled and recovered:
            key, label = "reconciling", "Reconciling"
            why = "An effect's outcome is unknown; the system is checking the provider before anything is retried."
            action = "None: no duplicate submit is possible. Refresh this page to see the outcome."
        elif legs and legs[-1].kind == Leg.Kind.RECOVERY:
            key, label, why = "recovering", "Recovering", "A new owner resumed the run from its last checkpoint."
            action = "Follow it live."
        else:
            key, label, why = "running", "Running", "A worker is running the agent."
            action = "Follow it live; it can be cancelled."
    elif run.status == Status.SUSPENDED:
        key, label = "waiting", "Waiting for review"
        why = "A tool call needs a reviewer's verdict; no worker is held while it waits."
        owner, action = "No worker: a reviewer decides", "Approve or deny the pending request in the console."
    elif run.status == Status.COMPLETED:
        key, label = ("recovered", "Recovered, completed") if recovered else ("completed", "Completed")
        why = (
            "A worker stopped mid-run; a new owner resumed from the last checkpoint and finished."
            if recovered else "The agent finished."
        )
        owner, action = "No owner: the run is finished", "None. Its recovery receipt: manage.py runs export."
    elif run.status == Status.FAILED:
        key, label, why = "failed", "Failed", run.error or "No reason was recorded."
        owner, action = "No owner: the run stopped", "An operator can queue another leg: manage.py runs resume."
    elif run.status == Status.CANCELLED:
        key, label, why = "cancelled", "Cancelled", "The run was cancelled: no new model calls, no new effects."
        owner, action = "No owner: the run is finished", "None."
    else:  # needs review
        key, label = "needs_review", "Needs review"
        why = run.error or "The system cannot decide safely on its own."
        owner, action = "A person: the run stopped for review", "An operator checks it, then: manage.py runs resume."
    last_event, last_event_at = _last_confirmed_event(run, legs, effects) if include_last_event else ("", None)
    return PeopleState(key=key, label=label, why=why, last_event=last_event, last_event_at=last_event_at,
                       owner=owner, next_action=action)


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
    from approvals.models import ApprovalRequest

    steps: list[RunStep] = []
    requests = list(ApprovalRequest.objects.filter(run=run).select_related("revision", "decided_by").order_by("id"))
    effects = {effect.tool_call_id: effect for effect in run.effects.order_by("id")}
    verdict_kinds = {
        ApprovalRequest.Status.APPROVED: "approved", ApprovalRequest.Status.USED: "approved",
        ApprovalRequest.Status.DENIED: "denied", ApprovalRequest.Status.EXPIRED: "expired",
        ApprovalRequest.Status.SUPERSEDED: "superseded",
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
    if run.is_terminal or run.status == Run.Status.NEEDS_REVIEW:
        steps.append(RunStep(run.status, run.get_status_display(), run.finish_reason or run.error, run.updated_at))
    return steps


def _effect_steps(effect: Effect) -> list[RunStep]:
    attempts = f"{effect.attempts} attempt{'s' if effect.attempts != 1 else ''}"
    steps = [RunStep("attempted", f"Attempted: {effect.tool_name}",
                     f"operation {effect.operation_id}, {attempts}", effect.created_at)]
    if effect.status == Effect.Status.RECONCILED:
        steps.append(RunStep("reconciled", f"Reconciled: {effect.tool_name}",
                             "the outcome was read back from the provider", effect.updated_at))
    if effect.status in {Effect.Status.COMMITTED, Effect.Status.RECONCILED} and effect.receipt:
        receipt = effect.receipt if isinstance(effect.receipt, dict) else {}
        reference = receipt.get("transaction_id") or effect.operation_id
        steps.append(RunStep("verified", f"Verified: {effect.tool_name}", f"receipt {reference}", effect.updated_at))
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
    effects = list(run.effects.order_by("id"))
    return RunPage(
        run=run,
        state=run_people_state(run, legs=legs, effects=effects),
        steps=run_step_list(run=run),
        legs=legs,
        effects=[(effect, _pretty_json(effect.receipt) if effect.receipt else "") for effect in effects],
        checkpoints=list(Checkpoint.objects.filter(run=run).order_by("id")),
        journal_count=run.journal.filter(is_sentinel=False).count(),
    )


def _pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)
