"""DatabaseSessionStore: the runtime's OwnedSessionStore on the Django ORM, fenced by owner epoch.

A history is a chain of RunMessage rows. Saving a checkpoint writes only the messages the chain does not
have yet plus one small Checkpoint row, so a run's storage grows with its history, not with the square
of it. Loading walks the chain back from the checkpoint's head.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

from runs.fencing import OwnerFence
from runs.models import Checkpoint, Run, RunMessage
from runs.runtime.codec import decode_value, encode_value
from runs.runtime.stores import SavedCheckpoint, SaveHook, root_run_id
from runs.runtime.types import AgentCheckpoint
from runs.sealing import seal, unseal

__all__ = ["DatabaseSessionStore", "root_run_id"]


def _encode(value: Any) -> bytes:
    return json.dumps(encode_value(value), ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def _decode(data: bytes) -> Any:
    return decode_value(json.loads(data))


def _dispatch(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the sync ORM directly, or hand back an awaitable when an event loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args, **kwargs)
    return sync_to_async(function)(*args, **kwargs)


class DatabaseSessionStore:
    """Checkpoints in the database, and nothing else. A fenced view checks the run's owner epoch in every
    save's transaction (a stale save raises StaleOwnerError) and runs its ``on_save`` hook there."""

    def __init__(self, *, fence: OwnerFence | None = None, on_save: SaveHook | None = None) -> None:
        self.fence = fence
        self.on_save = on_save

    def __repr__(self) -> str:
        return f"DatabaseSessionStore(fence={self.fence!r})"

    def fenced(self, run_id: str, epoch: int, *, on_save: SaveHook | None = None) -> DatabaseSessionStore:
        """This store for the worker that owns ``run_id`` at ``epoch``; ``on_save`` runs inside every save's
        transaction (the leg flushes its journal there, so a checkpoint never gets ahead of the wire)."""
        return type(self)(fence=OwnerFence(run_id, epoch), on_save=on_save)

    # The SessionStore protocol: sync callers get results, async callers get awaitables.

    def save(self, checkpoint: AgentCheckpoint) -> Any:
        return _dispatch(self.save_sync, checkpoint)

    def load(self, run_id: str) -> Any:
        return _dispatch(self.load_sync, run_id)

    def delete(self, run_id: str) -> Any:
        return _dispatch(self.delete_sync, run_id)

    def list(self) -> Any:
        return _dispatch(self.list_sync)

    def checkpoint_list(self, run_id: str, *, include_sub_agents: bool = False) -> Any:
        return _dispatch(self.checkpoint_list_sync, run_id, include_sub_agents)

    async def asave(self, checkpoint: AgentCheckpoint) -> None:
        await sync_to_async(self.save_sync)(checkpoint)

    async def aload(self, run_id: str) -> AgentCheckpoint | None:
        return await sync_to_async(self.load_sync)(run_id)

    # ------------------------------------------------------------------ writes

    @transaction.atomic
    def save_sync(self, checkpoint: AgentCheckpoint) -> Checkpoint:
        key = checkpoint["run_id"]
        run_pk, epoch = self._owned_run(root_run_id(key))
        previous = Checkpoint.objects.filter(session_key=key).select_related("head").order_by("-id").first()
        head, count = self._shared_prefix(key, previous, checkpoint["messages"])
        for position in range(count, len(checkpoint["messages"])):
            head = RunMessage.objects.create(
                run_id=run_pk, session_key=key, parent=head, position=position,
                data=seal(_encode(checkpoint["messages"][position])),
            )
        pending = checkpoint.get("pending_approvals")
        row = Checkpoint.objects.create(
            run_id=run_pk,
            session_key=key,
            step_index=checkpoint["step_index"],
            status=checkpoint["status"],
            usage=dict(checkpoint["usage"]),
            agent_path=list(checkpoint.get("agent_path") or []),
            head=head,
            message_count=len(checkpoint["messages"]),
            pending_approvals=seal(_encode(pending)) if pending is not None else None,
            created_at_ms=checkpoint["created_at"],
            owner_epoch=epoch,
        )
        if self.on_save is not None:
            self.on_save(SavedCheckpoint(checkpoint, row, previous.status if previous is not None else None))
        return row

    def _owned_run(self, run_id: str) -> tuple[int, int]:
        """The run's primary key and the epoch writing; fenced, only while that epoch owns the run."""
        if self.fence is None:
            row = Run.objects.filter(run_id=run_id).values_list("pk", "owner_epoch").first()
            if row is None:  # a run started outside the service (a script using the store directly)
                run = Run.objects.create(run_id=run_id, agent="", input_messages="[]", status=Run.Status.RUNNING)
                row = (run.pk, run.owner_epoch)
            return row
        if self.fence.run_id != run_id:
            raise ValueError(f"This store is fenced to run {self.fence.run_id!r}, not {run_id!r}.")
        return self.fence.hold(), self.fence.epoch

    def _shared_prefix(
        self, key: str, previous: Checkpoint | None, messages: list[dict[str, Any]]
    ) -> tuple[RunMessage | None, int]:
        """The last stored message this history shares with the previous checkpoint's, and how many it shares.
        Histories are immutable, so comparing the previous head is enough; a rewritten history branches."""
        if previous is None or previous.head is None:
            return None, 0
        count = previous.message_count
        if len(messages) >= count and unseal(previous.head.data) == _encode(messages[count - 1]):
            return previous.head, count
        chain = self._chain(key, previous.head_id)
        shared = 0
        for row, message in zip(chain, messages):
            if unseal(row.data) != _encode(message):
                break
            shared += 1
        return (chain[shared - 1] if shared else None), shared

    @transaction.atomic
    def delete_sync(self, run_id: str) -> None:
        Checkpoint.objects.filter(session_key=run_id).delete()
        RunMessage.objects.filter(session_key=run_id).delete()

    # ------------------------------------------------------------------- reads

    def load_sync(self, run_id: str) -> AgentCheckpoint | None:
        row = Checkpoint.objects.filter(session_key=run_id).order_by("-id").first()
        return None if row is None else self.checkpoint_from_row(row)

    def checkpoint_from_row(self, row: Checkpoint) -> AgentCheckpoint:
        """The AgentCheckpoint a stored row holds, full history included."""
        messages = [_decode(unseal(message.data)) for message in self._chain(row.session_key, row.head_id)]
        checkpoint: AgentCheckpoint = {
            "version": 1,
            "run_id": row.session_key,
            "step_id": row.step_id,
            "step_index": row.step_index,
            "status": row.status,  # type: ignore[typeddict-item]
            "messages": messages,
            "usage": row.usage,
            "created_at": row.created_at_ms,
        }
        if row.pending_approvals is not None:
            checkpoint["pending_approvals"] = _decode(unseal(row.pending_approvals))
        if row.agent_path:
            checkpoint["agent_path"] = list(row.agent_path)
        return checkpoint

    def _chain(self, key: str, head_id: int | None) -> list[RunMessage]:
        """The messages from the first to ``head_id``, following parent links (one query)."""
        if head_id is None:
            return []
        rows = {
            row.id: row
            for row in RunMessage.objects.filter(session_key=key, id__lte=head_id).only("id", "parent_id", "data")
        }
        chain = []
        current: int | None = head_id
        while current is not None:
            row = rows[current]
            chain.append(row)
            current = row.parent_id
        chain.reverse()
        return chain

    def checkpoint_list_sync(self, run_id: str, include_sub_agents: bool = False) -> list[AgentCheckpoint]:
        """Every stored checkpoint of ``run_id``, oldest first, as AgentCheckpoint dicts (time travel)."""
        rows = Checkpoint.objects.filter(run__run_id=run_id).order_by("id")
        if not include_sub_agents:
            rows = rows.filter(session_key=run_id)
        return [self.checkpoint_from_row(row) for row in rows]

    def list_sync(self) -> list[str]:
        return list(Checkpoint.objects.order_by().values_list("session_key", flat=True).distinct())

