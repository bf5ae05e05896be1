"""The storage seam: SessionStore, the fenced contract a worker uses, and the in-memory reference store.

``SessionStore`` is what the loops need (save, load). ``OwnedSessionStore`` is the whole contract a worker
uses: a view fenced to an owner epoch (a stale owner's save raises ``OwnershipLostError``), a hook that runs
inside every save's transaction (the journal flush, approval bookkeeping), async load, and the list of a
run's checkpoints. Every back end implements all of it and passes one contract suite.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from .exceptions import OwnershipLostError
from .types import AgentCheckpoint

__all__ = [
    "InMemorySessionStore",
    "OwnedSessionStore",
    "SaveHook",
    "SavedCheckpoint",
    "SessionStore",
    "create_in_memory_session_store",
    "is_descendant_key",
    "is_sub_agent_key",
    "resolve",
    "root_run_id",
]

T = TypeVar("T")


@runtime_checkable
class SessionStore(Protocol):
    """Where checkpoints live; latest save wins per run. Methods may be sync or async."""

    def save(self, checkpoint: AgentCheckpoint) -> None | Awaitable[None]: ...

    def load(self, run_id: str) -> AgentCheckpoint | None | Awaitable[AgentCheckpoint | None]: ...


def root_run_id(session_key: str) -> str:
    """The run a (possibly sub-agent) session key belongs to. A sub-agent's key is its parent's, ``::``, then
    ``agent_name#tool_call_id`` (subagents.child_run_id), so the root is the key up to the first later segment
    holding a ``#``: a root run id may hold ``::`` itself (``team::nightly``), as long as no segment after its
    first holds a ``#`` (the service's run ids hold none at all)."""
    segments = session_key.split("::")
    for index in range(1, len(segments)):
        if "#" in segments[index]:
            return "::".join(segments[:index])
    return session_key


def is_sub_agent_key(session_key: str) -> bool:
    """Whether ``session_key`` is a sub-agent's (a root run's key is its run id)."""
    return root_run_id(session_key) != session_key


def is_descendant_key(session_key: str, of: str) -> bool:
    """Whether ``session_key`` is a sub-agent's below the key ``of`` (a child's, a grandchild's, ...)."""
    prefix = f"{of}::"
    return session_key.startswith(prefix) and "#" in session_key[len(prefix):].split("::", 1)[0]


@dataclass(frozen=True)
class SavedCheckpoint:
    """What a save's hook is told: the checkpoint, the back end's handle on the stored revision, and the
    status of the checkpoint it follows under the same key (None for the first)."""

    checkpoint: AgentCheckpoint
    revision: Any
    previous_status: str | None

    @property
    def is_root(self) -> bool:
        return not is_sub_agent_key(self.checkpoint["run_id"])


#: Runs inside a save's transaction, after the checkpoint is written; raising undoes the save.
SaveHook = Callable[[SavedCheckpoint], None]


@runtime_checkable
class OwnedSessionStore(SessionStore, Protocol):
    """The contract a worker uses. ``fenced`` answers a view whose saves are accepted only while ``epoch``
    owns ``run_id`` (checked in the save's own transaction); ``on_save`` runs in that transaction."""

    def fenced(self, run_id: str, epoch: int, *, on_save: SaveHook | None = None) -> OwnedSessionStore: ...

    async def aload(self, run_id: str) -> AgentCheckpoint | None: ...

    def checkpoint_list(self, run_id: str, *, include_sub_agents: bool = False) -> Any:
        """Every stored checkpoint of ``run_id``, oldest first (time travel); sub-agents' on request."""

    def delete(self, run_id: str) -> Any: ...

    def list(self) -> Any: ...


async def resolve(value: T | Awaitable[T]) -> T:
    """Await ``value`` when a store method returned an awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value  # type: ignore[return-value]


class InMemorySessionStore:
    """The reference store: latest save wins per run id, every save kept in order for time travel, owner
    epochs kept in memory (``claim``). For tests and scripts, not production."""

    def __init__(self) -> None:
        self._latest: dict[str, AgentCheckpoint] = {}
        self._log: list[AgentCheckpoint] = []  # every save, oldest first
        self._owners: dict[str, int] = {}
        self.fence: tuple[str, int] | None = None
        self.on_save: SaveHook | None = None

    def claim(self, run_id: str) -> int:
        """Take ``run_id`` over: its owner epoch goes up by one, so older fenced views are refused."""
        self._owners[run_id] = self._owners.get(run_id, 0) + 1
        return self._owners[run_id]

    def fenced(self, run_id: str, epoch: int, *, on_save: SaveHook | None = None) -> InMemorySessionStore:
        view = InMemorySessionStore.__new__(InMemorySessionStore)
        view._latest, view._log, view._owners = self._latest, self._log, self._owners
        view.fence, view.on_save = (run_id, epoch), on_save
        return view

    def save(self, checkpoint: AgentCheckpoint) -> None:
        key = checkpoint["run_id"]
        if self.fence is not None:
            fenced_id, epoch = self.fence
            if fenced_id != root_run_id(key):
                raise ValueError(f"This store is fenced to run {fenced_id!r}, not {root_run_id(key)!r}.")
            if self._owners.get(fenced_id, 0) != epoch:
                raise OwnershipLostError(f"Run {fenced_id!r} is no longer owned by epoch {epoch}.")
        # A shallow copy: histories are immutable by contract, so sharing message lists is safe.
        stored: AgentCheckpoint = dict(checkpoint)  # type: ignore[assignment]
        previous = self._latest.get(key)
        if self.on_save is not None:  # before the save lands: a raising hook leaves the store as it was
            self.on_save(SavedCheckpoint(stored, len(self._log), previous["status"] if previous else None))
        self._latest[key] = stored
        self._log.append(stored)

    def load(self, run_id: str) -> AgentCheckpoint | None:
        checkpoint = self._latest.get(run_id)
        return dict(checkpoint) if checkpoint is not None else None  # type: ignore[return-value]

    async def aload(self, run_id: str) -> AgentCheckpoint | None:
        return self.load(run_id)

    def checkpoint_list(self, run_id: str, *, include_sub_agents: bool = False) -> list[AgentCheckpoint]:
        def wanted(key: str) -> bool:
            return key == run_id or (include_sub_agents and is_descendant_key(key, run_id))

        return [dict(checkpoint) for checkpoint in self._log if wanted(checkpoint["run_id"])]  # type: ignore[misc]

    def delete(self, run_id: str) -> None:
        self._latest.pop(run_id, None)
        self._log[:] = [checkpoint for checkpoint in self._log if checkpoint["run_id"] != run_id]

    def list(self) -> list[str]:
        return list(self._latest)

    def __len__(self) -> int:
        return len(self._latest)

    def __repr__(self) -> str:
        return f"InMemorySessionStore({len(self)} runs)"


def create_in_memory_session_store() -> InMemorySessionStore:
    return InMemorySessionStore()


