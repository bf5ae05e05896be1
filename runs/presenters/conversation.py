"""A thread as its chat page shows it: each turn's own messages (its user message, the assistant's text, its tool
calls with their inputs and results) as entries, the latest turn's approval requests with who may decide them, and
the verdicts already given.

A turn's history starts with the whole conversation before it; its own part is what follows the history it started
from (its user message onwards), read from its latest checkpoint, so a turn cut short shows what it checkpointed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from approvals.models import ApprovalRequest
from approvals.roles import approval_is_decidable_by
from approvals.selectors import approval_pending_list, approval_run_list
from runs.errors import SealedDataError
from runs.models import Run, Thread
from runs.presenters.outcome import run_first_request
from runs.presenters.timeline import run_verdict_list, verdict_label
from runs.runtime.subagents import child_run_id
from runs.runtime.types import Message
from runs.selectors import (
    run_input_messages,
    run_latest_messages,
    run_sub_agent_messages,
    thread_turn_list,
)
from runs.services.threads import ACTIVE_TURN_STATUSES

__all__ = ["ChatApproval", "ChatTurn", "thread_chat_turns", "thread_title", "turn_approvals", "turn_entries", "turn_verdicts"]

@dataclass(frozen=True)
class ChatTurn:
    """One turn: its run, and what it said and did, in order."""

    run: Run
    entries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_active(self) -> bool:
        return self.run.status in ACTIVE_TURN_STATUSES

    @property
    def user_text(self) -> str:
        """What the user asked in this turn."""
        return self.entries[0]["text"] if self.entries and self.entries[0]["kind"] == "user" else ""

    @property
    def reply(self) -> list[dict[str, Any]]:
        """What the agent said and did in answer."""
        return self.entries[1:] if self.entries and self.entries[0]["kind"] == "user" else self.entries


@dataclass(frozen=True)
class ChatApproval:
    """A request the latest turn waits on, and whether the page's user may answer it."""

    request: ApprovalRequest
    is_decidable: bool

    @property
    def input(self) -> Any:
        return _input_or_none(self.request)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content or [] if isinstance(part, dict)).strip()


def turn_entries(messages: list[Message], *, requests: list[ApprovalRequest] = (), session_key: str = "",
                 sub_agents: dict[str, list[Message]] | None = None,
                 agent_path: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Entries ``{"kind": "user" | "text" | "tool-call" | "approval" | "verdict" | "tool-result", ...}`` of a turn's
    own messages; a call that asked for approval is followed by its request and, once closed, its verdict, and a
    sub-agent call (one of ``sub_agents``, the histories by session key under ``session_key``) by the sub-agent's
    own entries, each with its ``agent_path`` (the order the live transcript shows them in)."""
    asked = {request.tool_call_id: request for request in requests}  # the latest request per call
    sub_agents = sub_agents or {}
    entries: list[dict[str, Any]] = []
    by = {"agent_path": list(agent_path)} if agent_path else {}
    for message in messages:
        content = message["content"]
        if message["role"] == "user":
            if not agent_path:  # a sub-agent's first message is its parent's call, shown already
                entries.append({"kind": "user", "text": _text(content)})
        elif message["role"] == "assistant":
            for part in [{"type": "text", "text": content}] if isinstance(content, str) else content:
                if part.get("type") == "text" and part.get("text"):
                    entries.append({"kind": "text", "text": part["text"], **by})
                elif part.get("type") == "tool_call":
                    entries.append({"kind": "tool-call", "tool_name": part["tool_name"], "input": part.get("input"),
                                    **by})
                    entries.extend(_approval_entries(asked.get(part.get("tool_call_id")), by))
                    child = child_run_id(session_key, part["tool_name"], part.get("tool_call_id", ""))
                    if child in sub_agents and len(agent_path) < 8:
                        entries.extend(turn_entries(sub_agents[child], requests=requests, session_key=child,
                                                    sub_agents=sub_agents, agent_path=(*agent_path, part["tool_name"])))
        elif message["role"] == "tool" and isinstance(content, list):
            for part in content:
                if part.get("type") == "tool_result":
                    entries.append({"kind": "tool-result", "tool_name": part["tool_name"],
                                    "output": part.get("output"), "is_error": bool(part.get("is_error")), **by})
    return entries


def _approval_entries(request: ApprovalRequest | None, by: dict[str, Any]) -> list[dict[str, Any]]:
    if request is None:
        return []
    entries = [{"kind": "approval", "tool_name": request.tool_name, "input": _input_or_none(request), **by}]
    if request.status != ApprovalRequest.Status.PENDING:
        entries.append({"kind": "verdict", "tool_name": request.tool_name, "status": request.status,
                        "label": verdict_label(request), "reason": request.reason})
    return entries


def _input_or_none(request: ApprovalRequest) -> Any:
    try:
        return request.tool_input
    except SealedDataError:  # sealed with a key this server does not have
        return None


def _own_messages(run: Run) -> list[Message]:
    """The messages of ``run``'s turn alone: from its user message (the last it started from) onwards."""
    started_from = run_input_messages(run)
    return run_latest_messages(run=run)[max(len(started_from) - 1, 0):]


def thread_chat_turns(*, thread: Thread) -> list[ChatTurn]:
    """Every turn of the thread, first first, each with its entries."""
    return [ChatTurn(run=run, entries=turn_entries(_own_messages(run), requests=approval_run_list(run=run),
                                                   session_key=run.run_id, sub_agents=run_sub_agent_messages(run=run)))
            for run in thread_turn_list(thread=thread)]


def turn_approvals(*, run: Run, user: Any) -> list[ChatApproval]:
    """The requests ``run`` waits on now, each saying whether ``user`` may decide it (approvals.roles)."""
    may_decide = approval_is_decidable_by(user=user, run=run)
    return [ChatApproval(request=row, is_decidable=may_decide) for row in approval_pending_list(run=run)]


def turn_verdicts(*, run: Run) -> list[dict[str, Any]]:
    """The verdicts on ``run``'s closed requests, JSON-ready and without tokens (as the live transcript has them)."""
    return run_verdict_list(run=run)


def thread_title(thread: Thread, turns: list[ChatTurn]) -> str:
    """What the thread is about, as lists show it: its first message."""
    return run_first_request(turns[0].run) if turns else ""
