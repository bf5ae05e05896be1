"""Resume: a 200-step run continued from a fresh process, to its first new part; and loading a long history.

The parent stores a 200-step run whose last leg died after step 199's checkpoint, then starts new Python
processes (``python -m bench.fresh_resume_child RUN_ID``) that start as `manage.py worker` does (Django set up,
the worker's imports and system checks, its warm-up, pools and heap freeze: reported apart, from the process's
start) and then time the resume: the connection, the leg's fenced store and its check of the checkpoint, the
resume to the first part of the resumed leg; then the same resume again in the same process (the warm figure).
The fresh figure counts what start-up waited for the warm-up: moving work before the clock is no gain. The
same number of processes start without the warm-up, for the figure before it in the same sitting.

Bars (issue 25): a fresh process under 6 ms on SQLite (connection included) and under 9 ms on PostgreSQL (the
connection apart); a 1,000-step history loads in under 20 ms (issue 8).
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

BARS = {"sqlite": 6.0, "postgresql": 9.0}
#: The figure each bar judges: SQLite's with its connection, PostgreSQL's without (reported apart).
BAR_FIGURE = {"sqlite": "fresh_ms", "postgresql": "fresh_connected_ms"}
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


def _fresh_process(run_id: str, env: dict[str, str], *, warmup: bool) -> dict[str, float]:
    spawned = time.time()
    completed = subprocess.run(
        [sys.executable, "-m", "bench.fresh_resume_child", run_id, *([] if warmup else ["--no-warmup"])], cwd=_ROOT,
        env=env, capture_output=True, text=True, timeout=120,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"The resume process failed: {completed.stderr[-2000:]}")
    sample = json.loads(completed.stdout.strip().splitlines()[-1])
    sample["startup_ms"] = (sample.pop("ready_at") - spawned) * 1000  # the interpreter's start to the clock's
    return sample


def _spread(samples: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    return {name: {"median": statistics.median(values), "min": min(values), "max": max(values)}
            for name in samples[0] for values in [[sample[name] for sample in samples]]}


def measure(*, steps: int = 200, repeats: int = 5) -> dict[str, Any]:
    """Resume the same interrupted run from ``repeats`` fresh processes with the worker's warm-up and ``repeats``
    without it, alternated (each leg stops at its first part, so it saves nothing and the next resumes the same
    checkpoint)."""
    run = _interrupted_run(steps)
    env = {**os.environ, "DATABASE_URL": database_url(), "DJANGO_SETTINGS_MODULE": "deuz_project.settings"}
    samples: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    try:
        _fresh_process(run.run_id, env, warmup=True)  # the first warms the file cache
        for _ in range(repeats):
            for warmup in (True, False):
                samples[warmup].append(_fresh_process(run.run_id, env, warmup=warmup))
    finally:
        run.delete()
    vendor = connection.vendor
    return {"vendor": vendor, "steps": steps, "repeats": repeats, "bar_ms": BARS.get(vendor, 9.0),
            "bar_figure": BAR_FIGURE.get(vendor, "fresh_connected_ms"), **_spread(samples[True]),
            "without_warmup": _spread(samples[False])}


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
