"""What a run came to, in a few words for the run list: paid or done, denied, failed, needs review, retry scheduled.

A run's status alone cannot tell a denied payment from a paid one (both complete), so the outcome reads the
run's effects and verdicts too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from approvals.models import ApprovalRequest
from approvals.selectors import approval_run_list, approval_state, approval_verdict
from runs.models import Effect, Run
from runs.presenters.plain_text import actor_name
from runs.presenters.state import PeopleState, run_people_state
from runs.runtime.codec import decode_value
from runs.selectors import run_effect_rows, run_leg_list

__all__ = ["OUTCOME_KINDS", "RUN_LIST_PREFETCH", "Outcome", "run_first_request", "run_list_outcome", "run_outcome",
           "run_approvals_told", "run_outcome_get"]

Verdict = ApprovalRequest.Status

#: An outcome's key as the API's ``outcome.kind`` (SERVICE.md): every other key is a run still in progress.
_KINDS = {"committed": "completed", "completed": "completed", "recovered": "completed", "denied": "denied",
          "expired": "denied", "failed": "failed", "needs_review": "needs_review", "cancelled": "cancelled"}

#: The ``outcome.kind`` values of the API, in the order SERVICE.md names them.
OUTCOME_KINDS = ("completed", "denied", "failed", "cancelled", "needs_review", "in_progress")


@dataclass(frozen=True)
class Outcome:
    """A run's outcome for people: a key for styling and a short sentence; for the API, its kind and who decided."""

    key: str  # committed | denied | expired | failed | needs_review | cancelled | waiting | retry_scheduled | ...
    label: str
    by: Any = None  # the user whose act decided it (the approver, the denier, who cancelled); None for the system

    @property
    def kind(self) -> str:
        """One of OUTCOME_KINDS: an expired request ends its run as a denial (by nobody)."""
        return _KINDS.get(self.key, "in_progress")


def _effect_done(effect: Effect) -> str:
    receipt = effect.receipt if isinstance(effect.receipt, dict) else {}
    if {"amount", "currency"} <= receipt.keys():  # a receipt for money moved
        text = f"Paid {receipt['amount']} {receipt['currency']}"
        if receipt.get("recipient"):
            text += f" to {receipt['recipient']}"
    else:
        text = f"{effect.tool_name} done"
    reference = receipt.get("transaction_id")
    return f"{text} ({reference})" if reference else text


#: What ``run_list_outcome`` reads of each run, to prefetch for a list of them.
RUN_LIST_PREFETCH = ("legs", "effects", "approval_requests__decided_by")


def run_list_outcome(run: Run) -> tuple[PeopleState, Outcome]:
    """A listed run's state and outcome, from its prefetched RUN_LIST_PREFETCH (the run list, the admin's)."""
    legs, effects = list(run.legs.all()), list(run.effects.all())
    state = run_people_state(run, legs=legs, effects=effects, include_last_event=False)
    requests = sorted(run.approval_requests.all(), key=lambda request: request.pk)
    return state, run_outcome(run, state=state, effects=effects, requests=requests)


def run_outcome(run: Run, *, state: PeopleState, effects: list[Effect],
                requests: list[ApprovalRequest]) -> Outcome:
    """The outcome of ``run`` from its state, its effects and its approval requests (all already loaded)."""
    if run.status == Run.Status.COMPLETED:
        done = [effect for effect in effects if effect.status in {Effect.Status.COMMITTED, Effect.Status.VERIFIED}]
        denied = [request for request in requests if request.status == Verdict.DENIED]
        expired = [request for request in requests if request.status == Verdict.EXPIRED]
        parts = [_effect_done(effect) for effect in done]
        parts += [f"Denied: {request.tool_name} by {actor_name(request.decided_by)}"
                  + (f" ({request.reason})" if request.reason else "") for request in denied]
        parts += [f"Expired: {request.tool_name} had no verdict in time" for request in expired]
        approved = [request for request in requests if request.status in {Verdict.APPROVED, Verdict.USED}]
        by = None
        if done:
            key = "committed"
            by = approved[-1].decided_by if approved else None
        elif denied:
            key, by = "denied", denied[-1].decided_by
        elif expired:
            key = "expired"
        else:
            key = state.key
            by = approved[-1].decided_by if approved else None
        return Outcome(key, "; ".join(parts) or state.label, by)
    if run.status == Run.Status.SUSPENDED:
        tools = ", ".join(request.tool_name for request in requests if request.status == Verdict.PENDING)
        return Outcome("waiting", f"Needs a verdict on {tools}" if tools else state.label)
    if run.status == Run.Status.FAILED:
        return Outcome("failed", f"Failed: {_first_line(run.error) or 'no reason recorded'}")
    if run.status == Run.Status.NEEDS_REVIEW:
        return Outcome("needs_review", f"Needs review: {_first_line(run.error) or 'the system cannot decide alone'}")
    if run.status == Run.Status.CANCELLED:
        who = actor_name(run.cancelled_by, "an operator")
        return Outcome("cancelled", f"Cancelled by {who}", run.cancelled_by)
    if state.key == "retry_scheduled" and run.retry_at is not None:
        return Outcome("retry_scheduled", f"Retry scheduled at {run.retry_at:%H:%M:%S} UTC, attempt {run.retry_attempt} "
                                          f"of {run.retry_limit}")
    return Outcome(state.key, state.label)


def run_approvals_told(requests: list[ApprovalRequest]) -> list[dict[str, Any]]:
    """Every request of a run as the API tells it: its status as of now, the verdict it came to, who and why."""
    return [
        {
            "approval_id": request.approval_id,
            "tool_name": request.tool_name,
            "status": approval_state(request),
            "verdict": approval_verdict(request),
            "decided_by": request.decided_by.get_username() if request.decided_by else None,
            "decided_at": request.decided_at,
            "reason": request.reason,
        }
        for request in requests
    ]


def run_outcome_get(run: Run) -> Outcome:
    """The outcome of one run, read from its legs, effects and approval requests (the API's run detail)."""
    legs, effects = list(run_leg_list(run=run)), list(run_effect_rows(run=run))
    state = run_people_state(run, legs=legs, effects=effects, include_last_event=False)
    return run_outcome(run, state=state, effects=effects, requests=approval_run_list(run=run))


def _first_line(text: str) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= 120 else line[:119] + "…"


def run_first_request(run: Run) -> str:
    """The text of the first user message the run started from (what was asked), or ""."""
    try:
        messages = decode_value(json.loads(run.input_messages))
    except (ValueError, TypeError):
        return ""
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(part.get("text", "") for part in content if isinstance(part, dict)).strip()
    return ""
