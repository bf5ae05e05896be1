"""Durable overhead per step as the worker runs a leg: journal on, streamed text, lease kept, leg closed.

A run of the bench agent is started and claimed as a worker does, then its whole leg runs through
``runs.execution.legs.leg_execute``; the baseline streams the same script with no store and no journal. Overhead =
(leg - baseline) / steps. Bars (issue 8): 1.5 ms on SQLite, 2.0 ms on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection
from django.test import override_settings

from bench.workload import MESSAGES, close_thread_connections, run_steps, script, sqlite_synchronous, tools
from runs.models import JournalEntry, Run

__all__ = ["BARS", "bench_agent", "measure"]

BARS = {"sqlite": 1.5, "postgresql": 2.0}
_STEPS = {"steps": 200}


def bench_agent(*, leg: Any = None) -> Any:
    """The bench workload as a registered agent (settings.DEUZ_AGENTS["bench"] while the bench runs)."""
    from runs.agents import AgentDefinition
    from runs.runtime.testing import ScriptedModel

    steps = _STEPS["steps"]
    return AgentDefinition(name="bench", model=ScriptedModel(script(steps, text=True), record=False), tools=tools(), max_steps=steps)


def measure(*, steps: int = 200, repeats: int = 5, synchronous: str | None = None) -> dict[str, Any]:
    _STEPS["steps"] = steps
    agents = {"bench": "bench.leg.bench_agent"}
    from django.conf import settings

    with override_settings(DEUZ_AGENTS={**settings.DEUZ_AGENTS, **agents}), sqlite_synchronous(synchronous):
        return asyncio.run(_measure(steps, repeats))


def _start_and_claim() -> Any:
    from runs.services.lifecycle import run_claim, run_start

    run = run_start(agent="bench", messages=list(MESSAGES))
    (claim,) = run_claim(worker_id="bench", run_id=run.run_id)
    return claim


async def _measure(steps: int, repeats: int) -> dict[str, Any]:
    from runs.execution.legs import leg_execute

    legs, plain, parts = [], [], 0
    try:
        for attempt in range(repeats + 1):
            plain_seconds = await run_steps(steps, stream=True)
            claim = await sync_to_async(_start_and_claim)()
            started = time.perf_counter()
            await leg_execute(claim)
            seconds = time.perf_counter() - started
            run = await Run.objects.aget(run_id=claim.run_id)
            if run.status != Run.Status.COMPLETED or run.step_index != steps - 1:
                raise RuntimeError(f"The bench leg ended {run.status} at step {run.step_index}: {run.error}")
            parts = await JournalEntry.objects.filter(run=run, is_sentinel=False).acount()
            await sync_to_async(Run.objects.filter(pk=run.pk).delete)()
            if attempt:
                legs.append(seconds)
                plain.append(plain_seconds)
    finally:
        await close_thread_connections()
    overheads = [(leg - base) / steps * 1000 for leg, base in zip(legs, plain)]
    return {
        "vendor": connection.vendor, "steps": steps, "repeats": repeats, "journal_parts": parts,
        "bar_ms": BARS.get(connection.vendor, 2.0),
        "overhead_ms": {"median": statistics.median(overheads), "min": min(overheads), "max": max(overheads)},
        "plain_step_ms": statistics.median(plain) / steps * 1000,
    }
