"""The model seam: any object with ``model_id`` and an async ``stream(request)`` of model events.

A request is ``{"messages", "tools", "system"}``; events are dicts:

- ``{"type": "text-delta", "text"}``
- ``{"type": "tool-call", "tool_call_id", "tool_name", "input"}``, plus ``"input_error": str`` when the
  model's input for the call could not be used (cut off at the output limit, not JSON, not an object): the
  call is then answered with an ``is_error`` result carrying that text, and the model can try again;
- ``{"type": "usage", "usage"}`` (optional, any number): the call's usage so far, so an aborted step still
  reports what it consumed;
- a last ``{"type": "finish", "usage": {"input_tokens", "output_tokens", "cache_read_tokens"?,
  "cache_write_tokens"?}, "finish_reason"?}`` where ``finish_reason`` is one of ``STEP_FINISH_REASONS``
  (inferred from the tool calls when absent).

A model may raise anything; the runtime raises it on as a classified ``ModelCallError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

__all__ = ["LanguageModel", "ModelRequest"]

ModelRequest = dict[str, Any]


@runtime_checkable
class LanguageModel(Protocol):
    model_id: str

    def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]: ...
