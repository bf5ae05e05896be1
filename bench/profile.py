"""Where a save's time goes: a run's checkpoints replayed through the leg's fenced store, synchronously, profiled.

The runtime's saves are recorded once (an in-memory store keeps the very dicts the engine passed), then
replayed into the database store on this thread, so the profile shows the store alone (no event loop, no
thread hop). ``manage.py bench --profile`` prints it with pyinstrument.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.workload import bench_run, durable_store, run_steps
from runs.models import Run

__all__ = ["profile_saves", "record_checkpoints", "replay_seconds"]


class _Recorder:
    def __init__(self) -> None:
        self.saved: list[dict[str, Any]] = []

    def save(self, checkpoint: dict[str, Any]) -> None:
        self.saved.append(dict(checkpoint))

    def load(self, run_id: str) -> None:
        return None


def record_checkpoints(steps: int) -> list[dict[str, Any]]:
    """The checkpoints a ``steps``-step run saves, in order (the messages lists shared as the engine shares them)."""
    recorder = _Recorder()
    asyncio.run(run_steps(steps, store=recorder, run_id="recorded"))
    return recorder.saved


def _replay(checkpoints: list[dict[str, Any]]) -> float:
    run = bench_run("replay")
    store = durable_store(run.run_id)
    saved = [{**checkpoint, "run_id": run.run_id} for checkpoint in checkpoints]
    try:
        started = time.perf_counter()
        for checkpoint in saved:
            store.save_sync(checkpoint)
        return time.perf_counter() - started
    finally:
        Run.objects.filter(pk=run.pk).delete()


def replay_seconds(steps: int, *, repeats: int = 3) -> list[float]:
    """Seconds the store takes for a ``steps``-step run's saves, on this thread, ``repeats`` times."""
    checkpoints = record_checkpoints(steps)
    _replay(checkpoints)  # warm-up
    return [_replay(checkpoints) for _ in range(repeats)]


def profile_saves(steps: int = 200) -> str:
    """A pyinstrument profile (text) of the replayed saves of one ``steps``-step run."""
    from pyinstrument import Profiler

    checkpoints = record_checkpoints(steps)
    _replay(checkpoints)
    profiler = Profiler(interval=0.0002)
    profiler.start()
    _replay(checkpoints)
    profiler.stop()
    return profiler.output_text(unicode=False, color=False, show_all=False)
