"""A run's progress read from its journal (the resumable wire), as events a terminal prints: closed steps,
live text, tool calls and results, approval requests, recovery, errors, scheduled retries (`runs follow`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runs.presenters.plain_text import one_line
from runs.stores import get_store

__all__ = ["JournalProgress", "ProgressEvent"]


@dataclass(frozen=True)
class ProgressEvent:
    """One line of `runs follow`: a closed step, an assistant's text or tool call, a new approval request."""

    kind: str  # step | delta | tool_call | tool_result | approval | recovery | error | retry
    step_index: int | None = None
    status: str = ""
    text: str = ""
    agent_path: tuple[str, ...] = ()


@dataclass
class JournalProgress:
    """A run's progress read from its journal (the resumable wire), each part reported once, text live."""

    run_id: str
    cursor: int = -1
    store: Any = field(default_factory=lambda: get_store("streams"))

    def poll(self) -> list[ProgressEvent]:
        events: list[ProgressEvent] = []
        while True:
            page = self.store.read(self.run_id, after=self.cursor, limit=500)
            for seq, part in page.parts:
                self.cursor = seq
                event = _progress_event(part)
                if event is not None:
                    events.append(event)
            if not page.has_more:
                return events


def _progress_event(part: dict[str, Any]) -> ProgressEvent | None:
    kind = part.get("type")
    if part.get("agent_path"):  # a sub-agent's part: its text and tool calls, marked with its path
        path = tuple(part["agent_path"])
        event = _progress_event({key: value for key, value in part.items() if key != "agent_path"})
        if event is None or event.kind not in ("delta", "tool_call", "tool_result"):
            return None
        return ProgressEvent(event.kind, text=event.text, agent_path=path)
    if kind == "step-start":
        return ProgressEvent("step", step_index=part.get("step_index"), status="started")
    if kind == "text-delta":
        return ProgressEvent("delta", text=part.get("text", ""))
    if kind == "tool-call":
        return ProgressEvent("tool_call", text=f"{part.get('tool_name')} {one_line(part.get('input', {}))}")
    if kind == "tool-result":
        marker = "error" if part.get("is_error") else "result"
        return ProgressEvent("tool_result", text=f"{part.get('tool_name')} {marker}: {one_line(part.get('output'))}")
    if kind == "tool-approval-request":
        approval = part.get("approval") or {}
        return ProgressEvent("approval", text=f"{approval.get('tool_name')} {one_line(approval.get('input', {}))}",
                             agent_path=tuple(approval.get("agent_path") or ()))
    if kind == "recovery":
        return ProgressEvent("recovery", text=part.get("message", ""), step_index=part.get("restarted_step_index"))
    if kind == "error":
        error = part.get("error") or {}
        return ProgressEvent("error", text=f"{error.get('name')}: {error.get('message')}")
    if kind == "retry":  # written by the worker (runs.agents.retries), after the error part of a transient model failure
        return ProgressEvent("retry", text=part.get("message", ""))
    return None
