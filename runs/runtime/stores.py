"""The storage seam: SessionStore and its in-memory reference implementation."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar, runtime_checkable

from .types import AgentCheckpoint

__all__ = ["InMemorySessionStore", "SessionStore", "create_in_memory_session_store", "resolve"]

T = TypeVar("T")


@runtime_checkable
class SessionStore(Protocol):
    """Where checkpoints live; latest save wins per run. Methods may be sync or async."""

    def save(self, checkpoint: AgentCheckpoint) -> None | Awaitable[None]: ...

    def load(self, run_id: str) -> AgentCheckpoint | None | Awaitable[AgentCheckpoint | None]: ...


async def resolve(value: T | Awaitable[T]) -> T:
    """Await ``value`` when a store method returned an awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value  # type: ignore[return-value]


class InMemorySessionStore:
    """The reference store: latest save wins per run id. For tests and demos, not production."""

    def __init__(self) -> None:
        self._checkpoints: dict[str, AgentCheckpoint] = {}

    def save(self, checkpoint: AgentCheckpoint) -> None:
        # A shallow copy: histories are immutable by contract, so sharing message lists is safe.
        self._checkpoints[checkpoint["run_id"]] = dict(checkpoint)  # type: ignore[assignment]

    def load(self, run_id: str) -> AgentCheckpoint | None:
        checkpoint = self._checkpoints.get(run_id)
        return dict(checkpoint) if checkpoint is not None else None  # type: ignore[return-value]

    def delete(self, run_id: str) -> None:
        self._checkpoints.pop(run_id, None)

    def list(self) -> list[str]:
        return list(self._checkpoints)

    def __len__(self) -> int:
        return len(self._checkpoints)

    def __repr__(self) -> str:
        return f"InMemorySessionStore({len(self)} runs)"


def create_in_memory_session_store() -> InMemorySessionStore:
    return InMemorySessionStore()


