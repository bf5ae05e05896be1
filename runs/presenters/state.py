"""The recovery state people see for a run (the third design document's states): its name, why, the last
confirmed event, who acts now and what can be done. Shown on pages, in `runs show`, and in receipts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from approvals.selectors import approval_latest_verdict, approval_pending_list
from runs.models import Effect, Leg, Run
from runs.presenters.plain_text import actor_name
from runs.selectors import run_effect_rows, run_latest_checkpoint_row, run_leg_list

__all__ = ["PeopleState", "run_people_state"]


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
    events: list[tuple[datetime, str]] = []
    checkpoint = run_latest_checkpoint_row(run=run)
    if checkpoint is not None:
        events.append((checkpoint.recorded_at, f"step {checkpoint.step_index} checkpointed ({checkpoint.status})"))
    for effect in effects:
        if effect.status not in {Effect.Status.PROPOSED, Effect.Status.APPROVED, Effect.Status.ATTEMPTED}:
            events.append((effect.updated_at, f"{effect.tool_name} {effect.get_status_display().lower()}"))
    verdict = approval_latest_verdict(run=run)
    if verdict is not None:
        who = actor_name(verdict.decided_by)
        events.append((verdict.decided_at, f"{verdict.tool_name} {verdict.get_status_display().lower()} by {who}"))
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
    effects = list(run_effect_rows(run=run)) if effects is None else effects
    key, label, why, owner, action = _state_by_status(run, legs, effects)
    last_event, last_event_at = _last_confirmed_event(run, legs, effects) if include_last_event else ("", None)
    return PeopleState(key=key, label=label, why=why, last_event=last_event, last_event_at=last_event_at,
                       owner=owner, next_action=action)


#: What a state says besides its last event: its key, label, why, who acts now and what can be done.
_Said = tuple[str, str, str, str, str]


def _state_by_status(run: Run, legs: list[Leg], effects: list[Effect]) -> _Said:
    Status = Run.Status
    if run.status == Status.QUEUED:
        return _queued_state(run, legs)
    if run.status == Status.RUNNING:
        return _running_state(run, legs, effects)
    if run.status == Status.SUSPENDED:
        return _suspended_state(run)
    if run.status == Status.COMPLETED:
        return _completed_state(legs)
    if run.status == Status.FAILED:
        return ("failed", "Failed", run.error or "No reason was recorded.", "No owner: the run stopped",
                "An operator can queue another leg: manage.py runs resume.")
    if run.status == Status.CANCELLED:
        who = actor_name(run.cancelled_by, "an operator")
        why = f" (“{run.cancel_reason}”)" if run.cancel_reason else ""
        return ("cancelled", "Cancelled", f"Cancelled by {who}{why}: no new model calls, no new effects.",
                "No owner: the run is finished", "None.")
    return _needs_review_state(run, effects)


def _queued_state(run: Run, legs: list[Leg]) -> _Said:
    if not legs:
        key, label, why = "queued", "Queued", "The run waits for a worker to claim it."
    elif legs[-1].finish_reason == "suspended":
        key, label, why = "resuming", "Resuming after a verdict", "Every request has a verdict; a worker resumes it."
    elif legs[-1].finish_reason == "retry" and run.retry_at is not None:
        # run.error reads "Retry scheduled at ..., attempt k of n: why" (runs.agents.retries.RetryPlan.description).
        key, label = "retry_scheduled", "Retry scheduled"
        why = run.error or (
            f"Retry scheduled at {run.retry_at:%Y-%m-%d %H:%M:%S} UTC, "
            f"attempt {run.retry_attempt} of {run.retry_limit}."
        )
    else:
        key, label, why = "retry_scheduled", "Retry scheduled", "Its last leg stopped early; another leg is queued."
    return key, label, why, "No owner: waiting for a worker", "Follow it live; it can still be cancelled."


def _running_state(run: Run, legs: list[Leg], effects: list[Effect]) -> _Said:
    recovered = any(leg.kind == Leg.Kind.RECOVERY for leg in legs)
    is_unsettled = any(effect.status in {Effect.Status.ATTEMPTED, Effect.Status.UNKNOWN} for effect in effects)
    owner = f"worker {run.worker_id or '-'} (owner epoch {run.owner_epoch})"
    if run.cancel_requested:
        key, label, why = "cancelling", "Cancelling", "A cancellation was requested; it stops between two steps."
        action = "None: the run is stopping."
    elif is_unsettled and recovered:
        key, label = "reconciling", "Reconciling"
        why = "An effect's outcome is unknown; the system is checking the provider before anything is retried."
        action = "None: no duplicate submit is possible. Refresh this page to see the outcome."
    elif legs and legs[-1].kind == Leg.Kind.RECOVERY:
        key, label, why = "recovering", "Recovering", "A new owner resumed the run from its last checkpoint."
        action = "Follow it live."
    elif legs and legs[-1].kind == Leg.Kind.RETRY and run.retry_attempt:
        key, label = "retrying", "Retrying"
        why = (
            f"Attempt {run.retry_attempt} of {run.retry_limit} after a transient model error; the run resumed "
            "from its last checkpoint."
        )
        action = "Follow it live; it can be cancelled."
    else:
        key, label, why = "running", "Running", "A worker is running the agent."
        action = "Follow it live; it can be cancelled."
    return key, label, why, owner, action


def _suspended_state(run: Run) -> _Said:
    if run.finish_reason == "effects-stopped":
        return ("effects_stopped", "Waiting: effects are stopped",
                "effects are stopped: an operator switched new effects off; nothing was attempted, nothing is lost.",
                "No worker: it continues when effects are released", "manage.py runs stop-effects --release")
    tools = ", ".join(request.tool_name for request in approval_pending_list(run=run)) or "no request is open"
    why = f"Waiting for a reviewer's verdict on {tools}; no worker is held while it waits."
    # Said to everyone who reads the run (its creator and support too), so it names who acts, not "you".
    return ("waiting", "Waiting for review", why, "No worker: a reviewer decides",
            "A reviewer approves or denies the request in the console; then the run continues by itself.")


def _completed_state(legs: list[Leg]) -> _Said:
    recovered = any(leg.kind == Leg.Kind.RECOVERY for leg in legs)
    retried = sum(leg.finish_reason == "retry" for leg in legs)
    key, label = ("recovered", "Recovered, completed") if recovered else ("completed", "Completed")
    why = (
        "A worker stopped mid-run; a new owner resumed from the last checkpoint and finished."
        if recovered else "The agent finished."
    )
    if retried:
        why += f" Model calls that failed transiently were retried {retried} time{'s' if retried != 1 else ''}."
    return key, label, why, "No owner: the run is finished", "None. Its recovery receipt: manage.py runs export."


def _needs_review_state(run: Run, effects: list[Effect]) -> _Said:
    action = "An operator checks it, then: manage.py runs resume."
    if any(effect.status == Effect.Status.NEEDS_REVIEW for effect in effects):
        action = ("A reviewer resolves the effect (retry, mark committed with a receipt, or abandon): "
                  "manage.py runs resolve, or manage.py runs resume.")
    return ("needs_review", "Needs review", run.error or "The system cannot decide safely on its own.",
            "A person: the run stopped for review", action)
