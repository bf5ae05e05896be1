"""The benchmarks' one workload: a scripted model making one tool call per step, each answered by ~300 bytes of JSON.

Every figure in bench/ runs this workload, so the numbers compare with each other and with the peers' (the
same shape LangGraph's and DBOS's figures in issue 8 were measured on). Durable runs go through the fenced
session store exactly as a worker's leg builds it (runs.execution.legs), save hook and all.
"""

from __future__ import annotations

import json
import time
import uuid
from contextlib import contextmanager
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection

from runs.models import Run
from runs.runtime import generate_text, stream_chat, tool
from runs.runtime.stores import resolve
from runs.runtime.testing import ScriptedModel
from runs.stores import direct_sqlite

__all__ = [
    "MESSAGES",
    "TOOL_RESULT",
    "TimedStore",
    "bench_run",
    "close_thread_connections",
    "durable_store",
    "run_steps",
    "script",
    "sqlite_synchronous",
    "tools",
]

#: The tool's answer at every step: a record of ~300 bytes of JSON.
TOOL_RESULT = {
    "id": "rec_0000000042",
    "status": "approved",
    "amount": {"value": 1284.5, "currency": "EUR"},
    "submitted_by": "ada.lovelace@example.com",
    "items": [{"sku": "TRAVEL-RAIL", "qty": 2}, {"sku": "HOTEL-NIGHT", "qty": 3}, {"sku": "MEAL", "qty": 7}],
    "notes": "Receipts attached; matches the travel policy.",
}
assert 280 <= len(json.dumps(TOOL_RESULT)) <= 340

_TEXT = "Checking the next record against the policy before deciding what to do. "  # 13 deltas when streamed


def script(steps: int, *, text: bool = False) -> list[dict[str, Any]]:
    """``steps`` model responses: ``steps - 1`` tool calls, then a final answer (optionally with text per step)."""
    responses = []
    for index in range(steps - 1):
        content: list[dict[str, Any]] = [{"type": "text", "text": _TEXT}] if text else []
        content.append({"type": "tool_call", "tool_call_id": f"call_{index}", "tool_name": "lookup", "input": {"row": index}})
        responses.append({"content": content, "usage": {"input_tokens": 10, "output_tokens": 5}})
    responses.append({"content": [{"type": "text", "text": "All records checked."}], "usage": {"input_tokens": 10, "output_tokens": 5}})
    return responses


async def _lookup(tool_input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return TOOL_RESULT


def tools() -> dict[str, Any]:
    return {"lookup": tool(execute=_lookup, description="Look one record up.")}


MESSAGES = [{"role": "user", "content": "Check every record of the quarter."}]


def bench_run(prefix: str) -> Run:
    """A fresh run row, owned by epoch 1, as a claim leaves it."""
    return Run.objects.create(
        run_id=f"bench-{prefix}-{uuid.uuid4().hex[:10]}", agent="bench", input_messages="[]",
        status=Run.Status.RUNNING, owner_epoch=1,
    )


def durable_store(run_id: str, epoch: int = 1) -> Any:
    """The fenced session store exactly as a worker's leg builds it (journal flush, run mirror, approvals hook)."""
    from runs.execution.legs import _Leg
    from runs.services.lifecycle import Claim

    leg = _Leg(Claim(run_id, epoch, 1, "start"), fault=lambda point: None)
    return leg.session_store()


class TimedStore:
    """Wraps a store and adds up, per step index, the time the runtime waits on its saves."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds: dict[int, float] = {}
        self.saves = 0

    async def save(self, checkpoint: Any) -> None:
        started = time.perf_counter()
        await resolve(self.inner.save(checkpoint))
        step = checkpoint["step_index"]
        self.seconds[step] = self.seconds.get(step, 0.0) + time.perf_counter() - started
        self.saves += 1

    def load(self, run_id: str) -> Any:
        return self.inner.load(run_id)


async def run_steps(
    steps: int, *, store: Any = None, run_id: str | None = None, stream: bool = False, max_steps: int | None = None
) -> float:
    """Seconds one ``steps``-step run takes, durable through ``store`` or not at all. With ``max_steps`` the run
    stops there, every step a tool call (a run to be continued)."""
    session = {"store": store, "run_id": run_id} if store is not None else None
    responses = script(steps + 1 if max_steps else steps, text=stream)
    started = time.perf_counter()
    if stream:
        result = stream_chat(
            model=ScriptedModel(responses, record=False), messages=list(MESSAGES), tools=tools(), max_steps=max_steps or steps,
            session=session,
        )
        async for _ in result.full_stream:
            pass
        outcome = await result.result
    else:
        outcome = await generate_text(
            model=ScriptedModel(responses, record=False), messages=list(MESSAGES), tools=tools(), max_steps=max_steps or steps,
            session=session,
        )
    elapsed = time.perf_counter() - started
    aclose = getattr(getattr(store, "inner", store), "aclose", None)
    if aclose is not None:  # the store's own connection (runs.stores.direct), as a leg closes it
        await aclose()
    if outcome.finish_reason != ("max-steps" if max_steps else "stop") or len(outcome.steps) != steps:
        raise RuntimeError(f"The bench run ended {outcome.finish_reason!r} after {len(outcome.steps)} steps.")
    return elapsed


def close_thread_connections() -> Any:
    """Close the connection of the thread sync_to_async runs the ORM on (an open one blocks dropping a test DB)."""
    from django.db import connections

    return sync_to_async(connections.close_all)()


@contextmanager
def sqlite_synchronous(mode: str | None) -> Any:
    """Run the block with PRAGMA synchronous=``mode`` on every new SQLite connection (None: the project's)."""
    from django.db.backends.signals import connection_created

    if mode is None or connection.vendor != "sqlite":
        yield
        return

    def pragma(sender: Any, connection: Any, **kwargs: Any) -> None:
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute(f"PRAGMA synchronous={mode}")

    def direct_pragma(raw: Any) -> None:  # the event loop's own connection (runs.stores.direct)
        raw.execute(f"PRAGMA synchronous={mode}")

    connection_created.connect(pragma)
    direct_sqlite.CONNECT_HOOKS.append(direct_pragma)
    from django.db import connections

    connections.close_all()  # so every connection of the block is new, and gets the pragma
    direct_sqlite.close()
    try:
        yield
    finally:
        connection_created.disconnect(pragma)
        direct_sqlite.CONNECT_HOOKS.remove(direct_pragma)
        connections.close_all()
        direct_sqlite.close()
