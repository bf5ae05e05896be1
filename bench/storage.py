"""Checkpoint storage must grow with the history, not with its square.

A tool loop of N steps runs through the real runtime into DatabaseSessionStore. We measure the bytes the
store holds after every step. Bars (issue 3): bytes written at step 200 within 1.2x of step 10, and all
stored bytes of the run within 2x of its final history's size.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from asgiref.sync import async_to_sync
from django.db import connection

from runs.models import Run
from runs.runtime import generate_text, tool
from runs.runtime.codec import encode_value
from runs.runtime.testing import ScriptedModel
from runs.stores.sessions import DatabaseSessionStore

_OUTPUT = "row " * 120  # a ~500-byte tool result
_THOUGHT = "Checking the next record before deciding. " * 4  # ~170 bytes of text per step


def stored_bytes(run_id: str) -> int:
    """Bytes the run's checkpoint rows and message rows occupy (row sizes on PostgreSQL; column sizes elsewhere)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT coalesce(sum(pg_column_size(m.*)), 0) FROM runs_runmessage m "
                "JOIN runs_run r ON r.id = m.run_id WHERE r.run_id = %s", [run_id])
            messages = cursor.fetchone()[0]
            cursor.execute(
                "SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM runs_checkpoint c "
                "JOIN runs_run r ON r.id = c.run_id WHERE r.run_id = %s", [run_id])
            return int(messages + cursor.fetchone()[0])
        cursor.execute(
            "SELECT coalesce(sum(length(m.data) + length(m.session_key) + 24), 0) FROM runs_runmessage m "
            "JOIN runs_run r ON r.id = m.run_id WHERE r.run_id = %s", [run_id])
        messages = cursor.fetchone()[0]
        cursor.execute(
            "SELECT coalesce(sum(length(c.session_key) + length(c.status) + length(c.usage) + "
            "length(c.agent_path) + coalesce(length(c.pending_approvals), 0) + 48), 0) "
            "FROM runs_checkpoint c JOIN runs_run r ON r.id = c.run_id WHERE r.run_id = %s", [run_id])
        return int(messages + cursor.fetchone()[0])


async def _read(tool_input, ctx):
    return _OUTPUT


class _MeasuringStore(DatabaseSessionStore):
    """Records the run's stored bytes after each boundary save."""

    def __init__(self) -> None:
        super().__init__()
        self.after_step: dict[int, int] = {}

    def save_sync(self, checkpoint):
        row = super().save_sync(checkpoint)
        self.after_step[checkpoint["step_index"]] = stored_bytes(checkpoint["run_id"])
        return row


@dataclass
class StorageResult:
    steps: int
    step_10_bytes: int
    last_step_bytes: int
    total_bytes: int
    history_bytes: int
    rewrite_everything_bytes: int

    @property
    def growth_ratio(self) -> float:
        return self.last_step_bytes / self.step_10_bytes

    @property
    def total_ratio(self) -> float:
        return self.total_bytes / self.history_bytes


def measure(steps: int = 200) -> StorageResult:
    run_id = f"bench-storage-{uuid.uuid4().hex[:8]}"
    Run.objects.create(run_id=run_id, agent="bench", input_messages="[]", status="running")
    script = [
        {"content": [{"type": "text", "text": _THOUGHT},
                     {"type": "tool_call", "tool_call_id": f"c{i}", "tool_name": "read", "input": {"row": i}}],
         "usage": {"input_tokens": 1, "output_tokens": 1}}
        for i in range(steps - 1)
    ] + [{"content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 1, "output_tokens": 1}}]
    store = _MeasuringStore()
    history_sizes: list[int] = []

    original = store.save_sync

    def save_and_size(checkpoint):
        history_sizes.append(len(json.dumps(encode_value(checkpoint["messages"]))))
        return original(checkpoint)

    store.save_sync = save_and_size  # type: ignore[method-assign]
    try:
        # async_to_sync sends the store's ORM calls back to this thread and its connection.
        result = async_to_sync(generate_text)(
            model=ScriptedModel(script), messages=[{"role": "user", "content": "Audit every row."}],
            tools={"read": tool(execute=_read)}, max_steps=steps,
            session={"store": store, "run_id": run_id},
        )
        final_history = len(json.dumps(encode_value(result.messages)))
        last = steps - 1
        return StorageResult(
            steps=steps,
            step_10_bytes=store.after_step[10] - store.after_step[9],
            last_step_bytes=store.after_step[last - 1] - store.after_step[last - 2],
            total_bytes=stored_bytes(run_id),
            history_bytes=final_history,
            rewrite_everything_bytes=sum(history_sizes),
        )
    finally:
        Run.objects.filter(run_id=run_id).delete()
