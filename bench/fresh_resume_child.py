"""The fresh process of bench.fresh_resume, started as `manage.py worker` starts, then one resume timed twice.

Start-up (reported apart): Django set up, the worker's imports, its system checks (`manage.py worker` runs them
before its handle), its pools opened and start-up heap frozen. The worker's warm-up (deuz_project.startup) starts
before the checks, as the worker's does; what start-up waited for it, and its own time, are reported, and the
wait counts in the fresh figure. Then the clock: the connection (on the ORM's thread, where the resume's reads
go), the leg's fenced store and its check of the checkpoint, the resume to its first part. Then the same resume
again in the same process: the warm figure. One JSON line.

``--no-warmup`` starts without the warm-up (the figure before it, in the same sitting).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

__all__: list[str] = []


async def _resume(run_id: str) -> dict[str, float]:
    """Connect, check the checkpoint as a leg does, resume to the first part: each stage's end, in ms from the start."""
    from asgiref.sync import sync_to_async
    from django.db import connection

    from bench.workload import durable_store, tools
    from runs.runtime.durable import resume_stream_from_checkpoint
    from runs.runtime.testing import ScriptedModel

    clock = time.perf_counter()
    await sync_to_async(lambda: connection.ensure_connection())()  # on the ORM's thread (a no-op when warm)
    connected = time.perf_counter()
    store = durable_store(run_id)
    if await store.aload(run_id) is None:  # what the leg checks first
        raise RuntimeError("The interrupted run has no checkpoint.")
    loaded = time.perf_counter()
    # record=False as every bench model: a recording model deep-copies the 401-message history before the leg's
    # first part reaches the consumer (4 ms, in the runs where the producer gets there first).
    model = ScriptedModel([{"content": [{"type": "text", "text": "done"}]}], record=False)
    stream = resume_stream_from_checkpoint(store, run_id, model=model, tools=tools(), max_steps=1)
    async for part in stream.full_stream:
        first = time.perf_counter()
        if part["type"] == "error":
            raise RuntimeError(part)
        break
    return {"connect_ms": (connected - clock) * 1000, "check_ms": (loaded - connected) * 1000,
            "resume_ms": (first - clock) * 1000, "resume_connected_ms": (first - connected) * 1000}


def _child(run_id: str, *, warmup: bool) -> None:
    started = time.perf_counter()
    import django

    django.setup()
    from django.conf import settings

    settings.DEBUG = False  # as a production worker runs: no query log
    set_up = time.perf_counter()
    from deuz_project.startup import open_database_pools, worker_process_startup, worker_warmup_start

    open_database_pools()  # start-up's work with or without the warm-up (worker_process_startup's first step)
    calling = time.perf_counter()
    warming = worker_warmup_start() if warmup else None  # as `manage.py worker` does, before its checks
    warmup_call = time.perf_counter() - calling
    from django.core import checks

    from runs.execution import legs, worker  # noqa: F401  (what a worker process has imported before its first leg)
    from runs.stores import get_store

    get_store("sessions"), get_store("streams")  # the back ends' imports, done at a worker's first leg
    checks.run_checks()  # what `manage.py worker` runs before its handle
    checked = time.perf_counter()
    worker_process_startup(warming)  # its pools opened, its warm-up finished, its heap frozen
    ready_at = time.time()
    ready = time.perf_counter()
    fresh = asyncio.run(_resume(run_id))
    warm = asyncio.run(_resume(run_id))
    waited = warmup_call + (warming.waited if warming else 0.0)
    print(json.dumps({
        "ready_at": ready_at,
        "django_setup_ms": (set_up - started) * 1000,
        "worker_startup_ms": (ready - set_up) * 1000,  # imports, checks, pools, heap freeze, the warm-up's wait
        "checks_ms": (checked - set_up) * 1000,
        "warmup_waited_ms": waited * 1000,  # what start-up spent on the warm-up: counted in the fresh figure
        "warmup_call_ms": warmup_call * 1000,  # of which starting it (the rest: waiting for it after the checks)
        "warmup_own_ms": (warming.seconds if warming else 0.0) * 1000,  # its time on its thread (overlapped)
        **fresh,
        "fresh_ms": fresh["resume_ms"] + waited * 1000,
        "fresh_connected_ms": fresh["resume_connected_ms"] + waited * 1000,
        **{f"warm_{name}": value for name, value in warm.items()},
    }))


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deuz_project.settings")
    _child(sys.argv[1], warmup="--no-warmup" not in sys.argv[2:])
