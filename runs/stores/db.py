"""DatabaseSessionStore: the runtime's SessionStore on the Django ORM, fenced by owner epoch.

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
from django.utils import timezone

from runs.errors import StaleOwnerError
from runs.models import Checkpoint, Run, RunMessage
from runs.runtime.codec import decode_value, encode_value
from runs.runtime.types import AgentCheckpoint
from runs.sealing import seal, unseal

__all__ = ["DatabaseSessionStore", "root_run_id"]


def root_run_id(session_key: str) -> str:
    """The run a (possibly sub-agent) session key belongs to: the part before the first ``::``."""
    return session_key.split("::", 1)[0]


def _encode(value: Any) -> bytes:
    return json.dumps(encode_value(value), ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def _decode(data: bytes) -> Any:
    return decode_value(json.loads(data))


def _dispatch(function: Any, *args: Any) -> Any:
    """Call the sync ORM directly, or hand back an awaitable when an event loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args)
    return sync_to_async(function)(*args)


class DatabaseSessionStore:
    """Checkpoints in the database. With a fence, every write first checks the run's owner epoch in the
    same transaction, and a stale write raises StaleOwnerError."""

    def __init__(self, *, fence: tuple[str, int] | None = None, before_write: Any = None) -> None:
        self.fence = fence
        self.before_write = before_write

    def __repr__(self) -> str:
        return f"DatabaseSessionStore(fence={self.fence!r})"

    def fenced(self, run_id: str, epoch: int, *, before_write: Any = None) -> DatabaseSessionStore:
        """This store for the worker that owns ``run_id`` at ``epoch``; ``before_write`` runs inside every
        save's transaction (the journal writer flushes there, so a checkpoint never gets ahead of the wire)."""
        return DatabaseSessionStore(fence=(run_id, epoch), before_write=before_write)

    # The SessionStore protocol: sync callers get results, async callers get awaitables.

    def save(self, checkpoint: AgentCheckpoint) -> Any:
        return _dispatch(self.save_sync, checkpoint)

    def load(self, run_id: str) -> Any:
        return _dispatch(self.load_sync, run_id)

    def delete(self, run_id: str) -> Any:
        return _dispatch(self.delete_sync, run_id)

    def list(self) -> Any:
        return _dispatch(self.list_sync)

    async def asave(self, checkpoint: AgentCheckpoint) -> None:
        await sync_to_async(self.save_sync)(checkpoint)

    async def aload(self, run_id: str) -> AgentCheckpoint | None:
        return await sync_to_async(self.load_sync)(run_id)

    # ------------------------------------------------------------------ writes

    @transaction.atomic
    def save_sync(self, checkpoint: AgentCheckpoint) -> Checkpoint:
        key = checkpoint["run_id"]
        is_root = "::" not in key
        run = self._owned_run(root_run_id(key), checkpoint if is_root else None)
        if self.before_write is not None:
            self.before_write()
        previous = Checkpoint.objects.filter(session_key=key).select_related("head").order_by("-id").first()
        head, count = self._shared_prefix(key, previous, checkpoint["messages"])
        for position in range(count, len(checkpoint["messages"])):
            head = RunMessage.objects.create(
                run=run, session_key=key, parent=head, position=position,
                data=seal(_encode(checkpoint["messages"][position])),
            )
        pending = checkpoint.get("pending_approvals")
        row = Checkpoint.objects.create(
            run=run,
            session_key=key,
            step_index=checkpoint["step_index"],
            status=checkpoint["status"],
            usage=dict(checkpoint["usage"]),
            agent_path=list(checkpoint.get("agent_path") or []),
            head=head,
            message_count=len(checkpoint["messages"]),
            pending_approvals=seal(_encode(pending)) if pending is not None else None,
            created_at_ms=checkpoint["created_at"],
            owner_epoch=run.owner_epoch,
        )
        if is_root:
            self._after_root_save(run, row, previous, pending or [])
        return row

    def _owned_run(self, run_id: str, root_checkpoint: AgentCheckpoint | None) -> Run:
        """The run, checked against the fence and updated in one statement (it also takes the row lock)."""
        changes: dict[str, Any] = {"updated_at": timezone.now()}
        if root_checkpoint is not None:
            # The status stays as it is: the run becomes suspended when its leg closes, after the journal
            # has every part of the leg (a follower that sees "suspended" must find the approval requests).
            changes.update(step_index=root_checkpoint["step_index"], usage=dict(root_checkpoint["usage"]))
        runs = Run.objects.filter(run_id=run_id)
        if self.fence is None:
            if not runs.exists():
                # A run started outside the service (a script using the store directly).
                Run.objects.create(run_id=run_id, agent="", input_messages="[]", status=Run.Status.RUNNING)
        else:
            fenced_id, epoch = self.fence
            if fenced_id != run_id:
                raise ValueError(f"This store is fenced to run {fenced_id!r}, not {run_id!r}.")
            runs = runs.filter(owner_epoch=epoch)
        if runs.update(**changes) == 0:
            raise StaleOwnerError(run_id, self.fence[1] if self.fence else None)
        return Run.objects.get(run_id=run_id)

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

    def _after_root_save(
        self, run: Run, row: Checkpoint, previous: Checkpoint | None, pending: list[dict[str, Any]]
    ) -> None:
        from approvals import services as approval_services  # approvals builds on runs, not the reverse

        if row.status == "suspended":
            approval_services.approval_requests_record(run=run, revision=row, requests=pending)
        elif previous is not None and previous.status == "suspended":
            # The verdicts of that suspension were settled into this checkpoint: their tokens are spent.
            approval_services.approval_requests_mark_used(run=run, revision=previous)

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

    def list_sync(self) -> list[str]:
        return list(Checkpoint.objects.order_by().values_list("session_key", flat=True).distinct())

