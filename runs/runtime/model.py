"""The model seam: any object with ``model_id`` and an async ``stream(request)`` of model events.

A request is ``{"messages", "tools", "system"}``; events are dicts:
``{"type": "text-delta", "text"}``, ``{"type": "tool-call", "tool_call_id", "tool_name", "input"}`` and a last
``{"type": "finish", "usage": {"input_tokens", "output_tokens"}}``.
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
