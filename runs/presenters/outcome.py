"""What a run came to, in a few words for the run list: paid or done, denied, failed, needs review, retry scheduled.

A run's status alone cannot tell a denied payment from a paid one (both complete), so the outcome reads the
run's effects and verdicts too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from approvals.models import ApprovalRequest
from runs.models import Effect, Run
from runs.presenters.plain_text import actor_name
from runs.presenters.state import PeopleState, run_people_state
from runs.runtime.codec import decode_value

__all__ = ["RUN_LIST_PREFETCH", "Outcome", "run_first_request", "run_list_outcome", "run_outcome"]

Verdict = ApprovalRequest.Status

@dataclass(frozen=True)
class Outcome:
    """A run's outcome for people: a key for styling and a short sentence."""

    key: str  # committed | denied | expired | failed | needs_review | cancelled | waiting | retry_scheduled | ...
    label: str


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
        if done:
            key = "committed"
        elif denied:
            key = "denied"
        elif expired:
            key = "expired"
        else:
            key = state.key
        return Outcome(key, "; ".join(parts) or state.label)
    if run.status == Run.Status.SUSPENDED:
        tools = ", ".join(request.tool_name for request in requests if request.status == Verdict.PENDING)
        return Outcome("waiting", f"Needs a verdict on {tools}" if tools else state.label)
    if run.status == Run.Status.FAILED:
        return Outcome("failed", f"Failed: {_first_line(run.error) or 'no reason recorded'}")
    if run.status == Run.Status.NEEDS_REVIEW:
        return Outcome("needs_review", f"Needs review: {_first_line(run.error) or 'the system cannot decide alone'}")
    if run.status == Run.Status.CANCELLED:
        who = actor_name(run.cancelled_by, "an operator")
        return Outcome("cancelled", f"Cancelled by {who}")
    if state.key == "retry_scheduled" and run.retry_at is not None:
        return Outcome("retry_scheduled", f"Retry scheduled at {run.retry_at:%H:%M:%S} UTC, attempt {run.retry_attempt} "
                                          f"of {run.retry_limit}")
    return Outcome(state.key, state.label)


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
