"""Resume: a 200-step run continued from a fresh process, to its first new part; and loading a long history.

The parent stores a 200-step run whose last leg died after step 199's checkpoint, then starts a new Python
process (``python -m bench.fresh_resume_child RUN_ID``) that sets Django up, imports what a worker imports, and only then
starts the clock: open the database connection, build the leg's fenced store, check the checkpoint as a leg
does, resume, and stop at the first part of the resumed leg. Interpreter and Django start-up are reported
apart. Bars (issue 8): under 8 ms on SQLite, under 12 ms on PostgreSQL; a 1,000-step history loads in under 20 ms.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.db import connection

from bench.workload import MESSAGES, TOOL_RESULT, bench_run, durable_store, run_steps
from deuz_project.database_url import database_url
from runs.models import Run

__all__ = ["BARS", "LOAD_BAR_MS", "measure", "measure_load"]

BARS = {"sqlite": 8.0, "postgresql": 12.0}
LOAD_BAR_MS = 20.0
_ROOT = Path(__file__).resolve().parent.parent


def _interrupted_run(steps: int) -> Run:
    """A run of ``steps`` steps whose leg died right after its last step's checkpoint (status running)."""
    run = bench_run("resume")
    store = durable_store(run.run_id)
    asyncio.run(run_steps(steps, store=store, run_id=run.run_id, max_steps=steps))
    latest = store.load_sync(run.run_id)
    store.save_sync({**latest, "status": "running", "step_index": steps - 1})
    return run


def measure(*, steps: int = 200, repeats: int = 5) -> dict[str, Any]:
    """Resume the same interrupted run from ``repeats`` fresh processes (each leg stops at its first part, so
    it saves nothing and the next resumes the same checkpoint)."""
    run = _interrupted_run(steps)
    env = {**os.environ, "DATABASE_URL": database_url(), "DJANGO_SETTINGS_MODULE": "deuz_project.settings"}
    samples = []
    try:
        for _ in range(repeats + 1):
            spawned = time.time()
            completed = subprocess.run(
                [sys.executable, "-m", "bench.fresh_resume_child", run.run_id], cwd=_ROOT, env=env, capture_output=True,
                text=True, timeout=120,
            )
            if completed.returncode != 0:
                raise RuntimeError(f"The resume process failed: {completed.stderr[-2000:]}")
            sample = json.loads(completed.stdout.strip().splitlines()[-1])
            sample["startup_ms"] = (sample.pop("ready_at") - spawned) * 1000
            samples.append(sample)
    finally:
        run.delete()
    samples = samples[1:]  # the first warms the file cache
    spread = {
        name: {"median": statistics.median(values), "min": min(values), "max": max(values)}
        for name in samples[0] for values in [[sample[name] for sample in samples]]
    }
    return {"vendor": connection.vendor, "steps": steps, "repeats": repeats, "bar_ms": BARS.get(connection.vendor, 12.0),
            **spread}


def measure_load(*, steps: int = 1000, repeats: int = 5) -> dict[str, Any]:
    """Load a ``steps``-step history (2 messages a step) through a new store view, ``repeats`` times."""
    from runs.stores.sessions import DatabaseSessionStore

    run = bench_run("load")
    messages: list[dict[str, Any]] = list(MESSAGES)
    for index in range(steps):
        call = {"type": "tool_call", "tool_call_id": f"call_{index}", "tool_name": "lookup", "input": {"row": index}}
        messages = [*messages, {"role": "assistant", "content": [call]}]
        result = {"type": "tool_result", "tool_call_id": f"call_{index}", "tool_name": "lookup", "output": TOOL_RESULT,
                  "is_error": False}
        messages = [*messages, {"role": "tool", "content": [result]}]
    checkpoint = {"version": 1, "run_id": run.run_id, "step_id": f"{run.run_id}#{steps - 1}", "step_index": steps - 1,
                  "status": "running", "messages": messages, "usage": {"input_tokens": 1, "output_tokens": 1},
                  "created_at": 0}
    try:
        DatabaseSessionStore().fenced(run.run_id, 1).save_sync(checkpoint)
        timings = []
        for _ in range(repeats + 1):
            store = DatabaseSessionStore().fenced(run.run_id, 1)  # a new view: nothing cached
            started = time.perf_counter()
            loaded = store.load_sync(run.run_id)
            timings.append((time.perf_counter() - started) * 1000)
            assert len(loaded["messages"]) == len(messages)
    finally:
        run.delete()
    timings = timings[1:]
    return {"vendor": connection.vendor, "steps": steps, "messages": len(messages), "bar_ms": LOAD_BAR_MS,
            "median": statistics.median(timings), "min": min(timings), "max": max(timings)}
