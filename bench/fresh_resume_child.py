"""The fresh process of bench.fresh_resume: Django set up and a worker's imports done, then the clock runs from
opening the database connection to the resumed leg's first part (printed as one JSON line)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

__all__: list[str] = []


def _child(run_id: str) -> None:
    started = time.perf_counter()
    import django

    django.setup()
    from django.conf import settings

    settings.DEBUG = False  # as a production worker runs: no query log
    from runs.execution import legs, worker  # noqa: F401  (what a worker process has imported before its first leg)
    from runs.runtime.durable import resume_stream_from_checkpoint
    from runs.runtime.testing import ScriptedModel
    from bench.workload import durable_store, tools
    from runs.stores import get_store

    get_store("sessions"), get_store("streams")  # the back ends' imports, done at a worker's first leg
    from deuz_project.startup import worker_process_startup

    worker_process_startup()  # as `manage.py worker` starts: its database pool opened (no connection yet), heap frozen
    ready_at = time.time()
    setup_ms = (time.perf_counter() - started) * 1000

    async def resume() -> dict[str, float]:
        from asgiref.sync import sync_to_async
        from django.db import connection as child_connection

        clock = time.perf_counter()
        await sync_to_async(lambda: child_connection.ensure_connection())()  # on the thread the ORM runs on
        connected = time.perf_counter()
        store = durable_store(run_id)
        if await store.aload(run_id) is None:  # what the leg checks first
            raise RuntimeError("The interrupted run has no checkpoint.")
        loaded = time.perf_counter()
        # record=False as every bench model: a recording model deep-copies the 401-message history before the
        # leg's first part reaches the consumer (4 ms, in the runs where the producer gets there first).
        model = ScriptedModel([{"content": [{"type": "text", "text": "done"}]}], record=False)
        stream = resume_stream_from_checkpoint(store, run_id, model=model, tools=tools(), max_steps=1)
        async for part in stream.full_stream:
            first = time.perf_counter()
            if part["type"] == "error":
                raise RuntimeError(part)
            break
        return {
            "connect_ms": (connected - clock) * 1000,
            "check_ms": (loaded - connected) * 1000,
            "resume_ms": (first - clock) * 1000,
            "resume_connected_ms": (first - connected) * 1000,
        }

    timings = asyncio.run(resume())
    print(json.dumps({"ready_at": ready_at, "django_setup_ms": setup_ms, **timings}))


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deuz_project.settings")
    _child(sys.argv[1])
