"""A run's story for people: its semantic steps in order (proposed, approved, attempted, reconciled, verified,
cancelled...), the conversation step by step with every tool call and what followed it (sub-agents' own steps
nested under the call that started them), the evidence a reviewer weighs, and everything the run's page shows.

Steps come from the records that say what happened (approval requests, effects, the run row) rather than
from the journal, so a page tells the same story whichever leg or process wrote them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from approvals.models import ApprovalRequest
from approvals.selectors import approval_run_list
from runs.errors import SealedDataError
from runs.models import Checkpoint, Effect, Leg, Run
from runs.presenters.edits import edit_changes
from runs.presenters.leg_ends import LegEnd, interruption_text, run_leg_ends
from runs.presenters.outcome import Outcome, run_first_request, run_outcome
from runs.presenters.plain_text import actor_name
from runs.presenters.state import PeopleState, run_people_state
from runs.runtime.subagents import child_run_id
from runs.selectors import (
    run_checkpoint_rows,
    run_effect_rows,
    run_fork_list,
    run_get,
    run_input_messages,
    run_journal_count,
    run_leg_list,
)
from runs.stores.sessions import checkpoint_from_row

__all__ = [
    "Evidence",
    "RunPage",
    "RunStep",
    "StoryCall",
    "StoryStep",
    "run_evidence_list",
    "run_page_get",
    "run_step_list",
    "run_story",
    "run_verdict_list",
    "verdict_label",
]

Verdict = ApprovalRequest.Status


@dataclass(frozen=True)
class RunStep:
    """One semantic step of a run's timeline: proposed, approved (or denied, expired...), attempted, reconciled,
    verified, a retry scheduled after a model error, a cancel, or the run's end; ``agent_path`` names the
    sub-agent it happened in (empty: the run)."""

    kind: str
    title: str
    detail: str
    at: datetime | None
    agent_path: tuple[str, ...] = ()


def _request_steps(request: ApprovalRequest) -> list[RunStep]:
    """A request's proposal and, once it has one, its verdict (approved, denied, expired, superseded, withdrawn)."""
    path = tuple(request.agent_path or ())
    # The revision is emptied when retention prunes the run's checkpoints; the request stays as the audit.
    at_step = f"at step {request.revision.step_index}, " if request.revision is not None else ""
    steps = [RunStep("proposed", f"Proposed: {request.tool_name}", f"{at_step}waiting for a reviewer",
                     request.issued_at, path)]
    status, who = request.status, actor_name(request.decided_by)
    reason = f": {request.reason}" if request.reason else ""
    if status in {Verdict.APPROVED, Verdict.USED} and request.is_edited:
        edit = _edit_or_none(request)
        changes = edit_changes(_input_or_none(request), edit) if edit is not None else "the edit is sealed"
        steps.append(RunStep("approved", f"Approved with an edit: {request.tool_name}",
                             f"edited by {who}: {changes}{reason}", request.decided_at, path))
    elif status in {Verdict.APPROVED, Verdict.USED}:
        steps.append(RunStep("approved", f"Approved: {request.tool_name}", f"by {who}{reason}", request.decided_at,
                             path))
    elif status == Verdict.DENIED:
        steps.append(RunStep("denied", f"Denied: {request.tool_name}", f"by {who}{reason}", request.decided_at, path))
    elif status == Verdict.EXPIRED:
        steps.append(RunStep("expired", f"Expired: {request.tool_name}",
                             "no verdict was given in time, so it was denied by default",
                             request.decided_at or request.expires_at, path))
    elif status == Verdict.SUPERSEDED:
        steps.append(RunStep("superseded", f"Superseded: {request.tool_name}",
                             "a newer suspension of the run asked again", request.decided_at or request.issued_at,
                             path))
    elif status == Verdict.CANCELLED:
        steps.append(RunStep("withdrawn", f"Withdrawn: {request.tool_name}",
                             f"the run was cancelled by {actor_name(request.decided_by, 'an operator')}",
                             request.decided_at, path))
    return steps


def _effect_steps(effect: Effect, agent_path: tuple[str, ...] = ()) -> list[RunStep]:
    attempts = f"{effect.attempts} attempt{'s' if effect.attempts != 1 else ''}"
    steps = [RunStep("attempted", f"Attempted: {effect.tool_name}",
                     f"operation {effect.operation_id}, {attempts}", effect.created_at, agent_path)]
    if effect.is_reconciled:
        steps.append(RunStep("reconciled", f"Reconciled: {effect.tool_name}",
                             "the outcome was read back from the provider", effect.updated_at, agent_path))
    if effect.status == Effect.Status.NEEDS_REVIEW:
        steps.append(RunStep("needs_review", f"Needs review: {effect.tool_name}",
                             "its outcome cannot be established; a reviewer resolves it", effect.updated_at,
                             agent_path))
    elif effect.status in {Effect.Status.COMMITTED, Effect.Status.VERIFIED}:
        receipt = effect.receipt if isinstance(effect.receipt, dict) else {}
        reference = receipt.get("transaction_id") or effect.operation_id
        kind = "verified" if effect.status == Effect.Status.VERIFIED else "committed"
        steps.append(RunStep(kind, f"{kind.capitalize()}: {effect.tool_name}", f"receipt {reference}",
                             effect.updated_at, agent_path))
    elif effect.status == Effect.Status.UNKNOWN:
        steps.append(RunStep("reconciling", f"Outcome unknown: {effect.tool_name}",
                             "the system is checking the provider before anything is retried", effect.updated_at,
                             agent_path))
    elif effect.status == Effect.Status.FAILED:
        steps.append(RunStep("failed", f"Failed: {effect.tool_name}", effect.error, effect.updated_at, agent_path))
    elif effect.status not in {Effect.Status.PROPOSED, Effect.Status.APPROVED, Effect.Status.ATTEMPTED}:
        steps.append(RunStep(str(effect.status), f"{effect.get_status_display()}: {effect.tool_name}", effect.error,
                             effect.updated_at, agent_path))  # a status this page does not know yet, as stored
    return steps


def _run_end_steps(run: Run, legs: list[Leg]) -> list[RunStep]:
    """Who cancelled, why and when, then how the run ended (a suspended or queued run cancelled at once is one
    step; a running one is the request, then its leg's stop)."""
    steps: list[RunStep] = []
    who = actor_name(run.cancelled_by, "an operator")
    if run.cancelled_at is not None:
        why = f"“{run.cancel_reason}”; " if run.cancel_reason else ""
        stopped_a_leg = any(leg.ended_at is not None and leg.ended_at >= run.cancelled_at for leg in legs)
        if run.status == Run.Status.CANCELLED and not stopped_a_leg:
            return [RunStep("cancelled", f"Cancelled by {who}", f"{why}no new model calls, no new effects",
                            run.cancelled_at)]
        steps.append(RunStep("cancel_requested", f"Cancel requested by {who}",
                             f"{why}the running leg stops between two steps", run.cancelled_at))
    if run.status == Run.Status.CANCELLED:
        steps.append(RunStep("cancelled", "Cancelled", "the leg stopped; no new model calls, no new effects",
                             run.updated_at))
    elif run.is_terminal or run.status == Run.Status.NEEDS_REVIEW:
        steps.append(RunStep(run.status, run.get_status_display(), run.error or run.finish_reason, run.updated_at))
    return steps


def run_step_list(*, run: Run, requests: list[ApprovalRequest] | None = None, effects: list[Effect] | None = None,
                  legs: list[Leg] | None = None, leg_ends: list[LegEnd] | None = None) -> list[RunStep]:
    """The run's semantic steps in the order they happened, from its approval requests, effects, legs and row;
    each interrupted leg is a step at its last sign of life, with the gap until its recovery."""
    requests = approval_run_list(run=run) if requests is None else requests
    effects = list(run_effect_rows(run=run)) if effects is None else effects
    legs = list(run_leg_list(run=run)) if legs is None else legs
    leg_ends = run_leg_ends(run, legs) if leg_ends is None else leg_ends
    paths = {request.tool_call_id: tuple(request.agent_path or ()) for request in requests}
    by_call: dict[str, list[Effect]] = defaultdict(list)
    for effect in effects:
        by_call[effect.tool_call_id].append(effect)
    steps: list[RunStep] = []
    placed: set[str] = set()
    for request in requests:
        steps.extend(_request_steps(request))
        if request.tool_call_id not in placed:
            placed.add(request.tool_call_id)
            for effect in by_call.get(request.tool_call_id, []):
                steps.extend(_effect_steps(effect, paths.get(effect.tool_call_id, ())))
    for effect in effects:
        if effect.tool_call_id not in placed:
            steps.extend(_effect_steps(effect))
    for leg in legs:
        if leg.finish_reason == "retry":  # its error is "Retry scheduled at ..., attempt k of n: why"
            steps.append(RunStep("retry_scheduled", "Retry scheduled", leg.error, leg.ended_at))
    for end in leg_ends:
        if end.is_interrupted:
            steps.append(RunStep("interrupted", f"Interrupted: leg {end.leg.number}", interruption_text(end, run),
                                 end.last_seen_at))
    steps.extend(_run_end_steps(run, legs))
    return _in_time_order(steps)


def _in_time_order(steps: list[RunStep]) -> list[RunStep]:
    """The steps in the order things happened; a step without a time keeps its place after the one before it."""
    keyed, last = [], datetime.min.replace(tzinfo=UTC)
    for index, step in enumerate(steps):
        last = step.at or last
        keyed.append((last, index, step))
    return [step for _, _, step in sorted(keyed, key=lambda item: item[:2])]


# ------------------------------------------------------------------------------------------------ the story


@dataclass(frozen=True)
class StoryCall:
    """One tool call and everything that followed it: its verdicts, effects, result and, for a sub-agent, the
    sub-agent's own steps."""

    tool_call_id: str
    tool_name: str
    input: Any
    events: tuple[RunStep, ...] = ()
    has_result: bool = False
    result: Any = None
    is_error: bool = False
    edit: dict[str, Any] | None = None  # {"input", "by"}: it ran with the input a person approved instead
    sub_agent: str = ""
    sub_steps: tuple[StoryStep, ...] = ()


@dataclass(frozen=True)
class StoryStep:
    """One model step of an agent: what it said and the tools it called; ``records`` are the step's checkpoints,
    the noisy technical records shown on demand."""

    number: int
    agent_path: tuple[str, ...]
    text: str
    calls: tuple[StoryCall, ...]
    records: tuple[Checkpoint, ...] = ()
    at: datetime | None = None
    from_history: bool = False  # a step of the history the run started with (a fork's origin, a thread's turns)


@dataclass
class _Histories:
    """The latest checkpoint of every session of a run (the run's and each sub-agent call's), read once."""

    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: dict[str, list[Checkpoint]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)


def _histories(run: Run, rows: list[Checkpoint]) -> _Histories:
    found = _Histories()
    newest: dict[str, Checkpoint] = {}
    for row in rows:
        found.rows.setdefault(row.session_key, []).append(row)
        newest[row.session_key] = row
    for key, row in newest.items():
        try:
            found.latest[key] = checkpoint_from_row(row)
        except SealedDataError:  # sealed with a key this process lacks: the page says so, nothing is guessed
            found.unreadable.append(key)
    return found


def _content_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [part for part in content or [] if isinstance(part, dict)]


def _steps_of(session_key: str, agent_path: tuple[str, ...], messages: list[dict[str, Any]], histories: _Histories,
              requests: dict[str, list[ApprovalRequest]], effects: dict[str, list[Effect]],
              depth: int = 0, history_steps: int = 0) -> list[StoryStep]:
    """The model steps of ``messages``; the first ``history_steps`` came with the run's input (numbered as in that
    history, without records), the rest are the session's own steps 0, 1... as its checkpoints number them."""
    results: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.get("role") == "tool":
            for part in _content_parts(message):
                if part.get("type") == "tool_result":
                    results[part.get("tool_call_id", "")] = part
    records_by_step: dict[int, list[Checkpoint]] = defaultdict(list)
    for row in histories.rows.get(session_key, []):
        records_by_step[row.step_index].append(row)
    steps: list[StoryStep] = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        from_history = len(steps) < history_steps
        number = len(steps) if from_history else len(steps) - history_steps
        parts = _content_parts(message)
        text = "".join(part.get("text", "") for part in parts if part.get("type") == "text").strip()
        calls = []
        for part in parts:
            if part.get("type") != "tool_call":
                continue
            call_id, name = part.get("tool_call_id", ""), part.get("tool_name", "")
            events: list[RunStep] = []
            for request in requests.get(call_id, []):
                events.extend(_request_steps(request))
            for effect in effects.get(call_id, []):
                events.extend(_effect_steps(effect, agent_path))
            child_key = child_run_id(session_key, name, call_id)
            sub_steps: list[StoryStep] = []
            child = histories.latest.get(child_key)
            if child is not None and depth < 8:
                sub_steps = _steps_of(child_key, (*agent_path, name), child.get("messages") or [], histories,
                                      requests, effects, depth + 1)
            result = results.get(call_id)
            calls.append(StoryCall(
                tool_call_id=call_id, tool_name=name, input=part.get("input"), events=tuple(_in_time_order(events)),
                has_result=result is not None, result=(result or {}).get("output"),
                is_error=bool((result or {}).get("is_error")),
                edit=(result or {}).get("edit"),
                sub_agent=name if child is not None or child_key in histories.rows else "",
                sub_steps=tuple(sub_steps),
            ))
        records = () if from_history else tuple(records_by_step.get(number, ()))
        steps.append(StoryStep(number=number, agent_path=agent_path, text=text, calls=tuple(calls), records=records,
                               at=records[0].recorded_at if records else None, from_history=from_history))
    return steps


def run_story(*, run: Run, requests: list[ApprovalRequest] | None = None, effects: list[Effect] | None = None,
              rows: list[Checkpoint] | None = None) -> list[StoryStep]:
    """The run's model steps, each with its tool calls and what followed them; a sub-agent call carries the
    sub-agent's own steps (and their approvals and effects)."""
    requests = approval_run_list(run=run) if requests is None else requests
    effects = list(run_effect_rows(run=run)) if effects is None else effects
    rows = list(run_checkpoint_rows(run=run)) if rows is None else rows
    return _story(run, _histories(run, rows), requests, effects)


def _story(run: Run, histories: _Histories, requests: list[ApprovalRequest], effects: list[Effect]) -> list[StoryStep]:
    root = histories.latest.get(run.run_id)
    messages = root["messages"] if root is not None else run_input_messages(run)
    by_call_requests: dict[str, list[ApprovalRequest]] = defaultdict(list)
    for request in requests:
        by_call_requests[request.tool_call_id].append(request)
    by_call_effects: dict[str, list[Effect]] = defaultdict(list)
    for effect in effects:
        by_call_effects[effect.tool_call_id].append(effect)
    history_steps = sum(1 for message in run_input_messages(run) if message.get("role") == "assistant")
    return _steps_of(run.run_id, (), messages, histories, by_call_requests, by_call_effects,
                     history_steps=history_steps)


# ------------------------------------------------------------------------------------------- the evidence


@dataclass(frozen=True)
class Evidence:
    """A tool result the run has so far: what a reviewer weighs before deciding. ``is_client_supplied`` marks a
    result the API client sent with its messages rather than one a tool of this run produced."""

    tool_name: str
    output: Any
    is_error: bool
    agent_path: tuple[str, ...]
    is_client_supplied: bool


def _tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        part
        for message in messages
        if message.get("role") == "tool"
        for part in _content_parts(message)
        if part.get("type") == "tool_result"
    ]


def run_evidence_list(*, run: Run, rows: list[Checkpoint] | None = None) -> list[Evidence]:
    """Every tool result in the run's latest histories (the run's, then each sub-agent's), oldest first."""
    rows = list(run_checkpoint_rows(run=run)) if rows is None else rows
    return _evidence(run, _histories(run, rows))


def _evidence(run: Run, histories: _Histories) -> list[Evidence]:
    # A fork's history holds its origin's tool results: they are the origin's, not sent by a client.
    client_ids = set() if run.is_fork else {part.get("tool_call_id") for part in _tool_results(run_input_messages(run))}
    root = histories.latest.get(run.run_id)
    sessions = [(run.run_id, root["messages"] if root is not None else run_input_messages(run), ())]
    sessions += [
        (key, checkpoint.get("messages") or [], tuple(checkpoint.get("agent_path") or ()))
        for key, checkpoint in histories.latest.items()
        if key != run.run_id
    ]
    return [
        Evidence(
            tool_name=part.get("tool_name", ""), output=part.get("output"), is_error=bool(part.get("is_error")),
            agent_path=path, is_client_supplied=key == run.run_id and part.get("tool_call_id") in client_ids,
        )
        for key, messages, path in sessions
        for part in _tool_results(messages)
    ]


# ----------------------------------------------------------------------------------------------- the page


@dataclass(frozen=True)
class RunPage:
    """Everything the run's timeline page shows, read together."""

    run: Run
    state: PeopleState
    outcome: Outcome
    request_text: str
    steps: list[RunStep]
    story: list[StoryStep]
    legs: list[Leg]
    leg_ends: list[LegEnd]
    effects: list[Effect]
    checkpoints: list[Checkpoint]
    journal_count: int
    client_results: list[Evidence]
    unreadable_sessions: list[str]
    forks: list[Run] = field(default_factory=list)  # the runs forked from this one, oldest first
    fork_points: frozenset[int] = frozenset()  # the checkpoint rows a fork starts from: the run's last of each step


def run_page_get(*, run_id: str | None = None, run: Run | None = None) -> RunPage:
    """One run with its people-facing state, outcome, semantic steps, story, legs, effects and technical records."""
    run = run_get(run_id=run_id) if run is None else run
    legs = list(run_leg_list(run=run))
    leg_ends = run_leg_ends(run, legs)
    effects = list(run_effect_rows(run=run))
    requests = approval_run_list(run=run)
    rows = list(run_checkpoint_rows(run=run))
    histories = _histories(run, rows)
    state = run_people_state(run, legs=legs, effects=effects)
    return RunPage(
        run=run,
        state=state,
        outcome=run_outcome(run, state=state, effects=effects, requests=requests),
        request_text=run_first_request(run),
        steps=run_step_list(run=run, requests=requests, effects=effects, legs=legs, leg_ends=leg_ends),
        story=_story(run, histories, requests, effects),
        legs=legs,
        leg_ends=leg_ends,
        effects=effects,
        checkpoints=rows,
        journal_count=run_journal_count(run=run),
        client_results=[item for item in _evidence(run, histories) if item.is_client_supplied],
        unreadable_sessions=histories.unreadable,
        forks=list(run_fork_list(run=run)),
        fork_points=_fork_points(run, rows),
    )


def _fork_points(run: Run, rows: list[Checkpoint]) -> frozenset[int]:
    """The ids of the rows runs.services.fork starts from: the run's own latest checkpoint of each step."""
    latest = {row.step_index: row.pk for row in rows if row.session_key == run.run_id}
    return frozenset(latest.values())



def run_verdict_list(*, run: Run) -> list[dict[str, Any]]:
    """The run's closed approval requests as the live transcript shows them (who, which verdict, why), oldest
    first; JSON-ready, and without tokens."""
    return [
        {
            "approval_id": row.approval_id,
            "tool_name": row.tool_name,
            "input": _input_or_none(row),
            "edited_input": _edit_or_none(row),
            "agent_path": list(row.agent_path or []),
            "status": row.status,
            "label": verdict_label(row),
            "by": row.decided_by.get_username() if row.decided_by else "",
            "reason": row.reason,
            "at": row.decided_at.isoformat() if row.decided_at else "",
        }
        for row in approval_run_list(run=run)
        if row.status != Verdict.PENDING
    ]


def _edit_or_none(request: ApprovalRequest) -> Any:
    try:
        return request.edited_input
    except SealedDataError:  # sealed with a key this process lacks
        return None


def _input_or_none(request: ApprovalRequest) -> Any:
    try:
        return request.tool_input
    except SealedDataError:  # sealed with a key this process lacks
        return None


def verdict_label(request: ApprovalRequest) -> str:
    """What became of a request, as people say it: "Approved by rita", "Denied by rita", "Expired unanswered"."""
    who = actor_name(request.decided_by)
    edited = " with an edited input" if request.is_edited else ""
    return {
        Verdict.PENDING: "Waiting for a verdict",
        Verdict.APPROVED: f"Approved by {who}{edited}",
        Verdict.USED: f"Approved by {who}{edited}, then carried out",
        Verdict.DENIED: f"Denied by {who}",
        Verdict.EXPIRED: "Expired without a verdict",
        Verdict.SUPERSEDED: "Superseded by a newer request",
        Verdict.CANCELLED: f"Withdrawn: the run was cancelled by {actor_name(request.decided_by, 'an operator')}",
    }.get(request.status, request.get_status_display())
