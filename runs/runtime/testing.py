"""ScriptedModel: the deterministic model for tests and the built-in demo agents."""

from __future__ import annotations

import asyncio
import copy
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from .exceptions import ScriptExhaustedError
from .model import ModelRequest

__all__ = ["ScriptedModel"]

Response = Mapping[str, Any] | Callable[[ModelRequest], Mapping[str, Any]]
_CHUNK = re.compile(r"\S+\s*|\s+")


class ScriptedModel:
    """Answers each request with the next scripted response; text streams as several deltas.

    A response is ``{"content": [parts], "usage": {...}, "finish_reason"?}`` or a callable ``request -> response``.
    Parts are ``{"type": "text", "text"}`` and ``{"type": "tool_call", "tool_name", "input", "tool_call_id"?,
    "input_error"?}``. ``requests`` keeps a deep copy of each request; ``record=False`` keeps none (a benchmark's
    model: the copies cost a walk of the whole history a call, and hold every history ever sent).
    """

    def __init__(
        self,
        responses: Iterable[Response],
        *,
        model_id: str = "scripted",
        delay_ms: int = 0,
        pricing: Mapping[str, float] | None = None,
        record: bool = True,
    ) -> None:
        self.model_id = model_id
        self.responses = list(responses)
        self.delay_ms = delay_ms
        self.pricing = dict(pricing) if pricing else None
        self.record = record
        self.requests: list[ModelRequest] = []
        self._calls = 0

    @property
    def calls(self) -> int:
        return self._calls

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        index = self._calls
        self._calls += 1
        if self.record:  # a deep copy, so what a test asserts is what the model saw, whatever happens later
            self.requests.append(copy.deepcopy(dict(request)))
        if index >= len(self.responses):
            raise ScriptExhaustedError(
                f"ScriptedModel {self.model_id!r} has {len(self.responses)} response(s) and was called "
                f"{index + 1} times; its script ran out."
            )
        response = self.responses[index]
        if callable(response):
            response = response(request)
        for part in response.get("content", []):
            if part["type"] == "text":
                for chunk in _CHUNK.findall(part["text"]):
                    if self.delay_ms:
                        await asyncio.sleep(self.delay_ms / 1000)
                    yield {"type": "text-delta", "text": chunk}
            elif part["type"] == "tool_call":
                event = {
                    "type": "tool-call",
                    "tool_call_id": part.get("tool_call_id") or f"call_{uuid.uuid4().hex[:16]}",
                    "tool_name": part["tool_name"],
                    "input": dict(part.get("input") or {}),
                }
                if part.get("input_error"):  # a cut-off or malformed input, as a provider reports it
                    event["input_error"] = part["input_error"]
                yield event
            else:
                raise ValueError(f"ScriptedModel cannot emit a {part['type']!r} part.")
        usage = dict(response.get("usage") or {"input_tokens": 0, "output_tokens": 0})
        finish: dict[str, Any] = {"type": "finish", "usage": usage}
        if response.get("finish_reason"):  # e.g. "length": a scripted answer cut off at the output limit
            finish["finish_reason"] = response["finish_reason"]
        yield finish
