"""One model call of a step: the provider's stream read into text, tool calls, usage and a finish reason.

Part of the step engine (``engine._StepEngine`` inherits ``ModelCall``), kept apart because reading a
provider's events, classifying its failures and accounting the usage of a call cut short is a concept of its
own. The text deltas and tool calls are emitted as they arrive.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .exceptions import ModelCallError, RunError, classify_model_error
from .faults import FaultPoint
from .tools import Tool
from .types import StreamPart, Usage
from .usage import add_usage, empty_usage, normalize_usage

if TYPE_CHECKING:
    from .deps import Deps

__all__ = ["ModelCall", "tool_call_part"]


class ModelCall:
    """The step engine's model call; the attributes it reads are the engine's."""

    deps: Deps
    emit: Callable[[StreamPart], None]
    leg_usage: Usage
    messages: list
    unaccounted: Usage | None

    async def _call_model(
        self, step: int, model: Any, tools: dict[str, Tool], system: str | None
    ) -> tuple[str, list[dict[str, Any]], Usage, str]:
        """One model call: its text, tool calls, usage and step finish reason (see ``STEP_FINISH_REASONS``)."""
        request = {"messages": self.messages, "tools": [spec.spec() for spec in tools.values()], "system": system}
        pricing = getattr(model, "pricing", None)
        chunks: list[str] = []
        calls: list[dict[str, Any]] = []
        usage: Usage = empty_usage()
        reason: str | None = None
        self.unaccounted = usage
        events = model.stream(request).__aiter__()
        try:
            while True:
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    break
                except ModelCallError as error:
                    error.usage = add_usage(self.leg_usage, self.unaccounted or empty_usage())
                    raise
                except (RunError, asyncio.CancelledError):
                    raise
                except Exception as exc:  # a provider's failure, classified for the caller's retry policy
                    error = classify_model_error(exc, secrets=self.deps.secrets)
                    error.usage = add_usage(self.leg_usage, self.unaccounted or empty_usage())
                    raise error from exc
                kind = event.get("type")
                if kind == "text-delta":
                    chunks.append(event["text"])
                    self.emit({"type": "text-delta", "text": event["text"]})
                    self.deps.fault(FaultPoint.MID_STREAM)
                elif kind == "tool-call":
                    call = _model_tool_call(event)
                    calls.append(call)
                    self.emit(tool_call_part(call))
                elif kind == "usage":
                    self.unaccounted = normalize_usage(event.get("usage"), pricing=pricing)
                elif kind == "finish":
                    usage = normalize_usage(event.get("usage"), pricing=pricing)
                    self.unaccounted = usage
                    reason = event.get("finish_reason")
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()  # a step left early (an abort, a fault) closes the provider's request
        return "".join(chunks), calls, usage, _step_reason(reason, has_calls=bool(calls))


def tool_call_part(call: Mapping[str, Any]) -> StreamPart:
    part = {"type": "tool-call", "tool_call_id": call["tool_call_id"], "tool_name": call["tool_name"], "input": call["input"]}
    if call.get("input_error"):
        part["input_error"] = call["input_error"]
    return part


def _model_tool_call(event: Mapping[str, Any]) -> dict[str, Any]:
    """A model's tool-call event as a history tool call; an unusable input is kept as ``input_error``."""
    call = {"tool_call_id": event["tool_call_id"], "tool_name": event["tool_name"], "input": event.get("input") or {}}
    if not isinstance(call["input"], dict):
        call["input"], call["input_error"] = {}, _not_an_object(call["input"])
    if event.get("input_error"):
        call["input_error"] = str(event["input_error"])
    return call


def _not_an_object(value: Any) -> str:
    return (
        f"The tool call's input is not a JSON object (got {type(value).__name__}); the tool was not run. "
        "Call it again with an object of the named arguments."
    )


_STEP_REASONS = frozenset({"stop", "tool-calls", "length", "content-filter", "other"})


def _step_reason(reason: Any, *, has_calls: bool) -> str:
    """The model's own finish reason, or one inferred from the calls (some servers say ``stop`` with calls)."""
    if reason not in _STEP_REASONS:
        reason = None
    if reason in (None, "stop", "tool-calls"):
        return "tool-calls" if has_calls else "stop"
    return reason

