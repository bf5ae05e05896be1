"""The bench's parts that need real processes (issue 8, items 4-6), sized for a full or a quick run.

On SQLite: verdict to motion with a worker embedded in daphne (one process, the in-memory channel layer, as
SQLite is deployed). On PostgreSQL, one fleet (daphne and two
`manage.py worker` processes, with the Redis channel layer) for verdict to motion, the live tail, fan-out and
throughput (with 1, 2 and 4 workers), in that order (the workers are stopped and started between them).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.db import connection

from bench import motion, tail, throughput
from bench.fleet import BENCH_ENV, BENCH_SETTINGS, Fleet
from deuz_project.database_url import database_url

__all__ = ["FULL", "QUICK", "Sizes", "measure"]


@dataclass(frozen=True, kw_only=True)
class Sizes:
    approvals: int = 50
    tail_runs: int = 100
    fanout_followers: int = 500
    fanout_runs: int = 10
    throughput_runs: int = 1000
    throughput_steps: int = 20
    throughput_concurrency: int = 16
    tail_parts: int = 30
    tail_interval_ms: int = 100
    cancels: int = 20  # cancel to stop (bench.cancel), per door
    kills: int = 20  # takeover (bench.takeover)


FULL = Sizes()
QUICK = Sizes(approvals=10, tail_runs=20, fanout_followers=100, fanout_runs=5, throughput_runs=60, cancels=10,
              kills=5)


def measure(*, sizes: Sizes, redis_url: str, progress: Callable[[str], None], log_dir: Path | None = None) -> dict:
    """The fleet parts this database can run, as one dict for bench/results.json."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="deuz-bench-"))
    url = database_url()
    data: dict[str, Any] = {"sizes": asdict(sizes), "logs": str(log_dir)}
    if connection.vendor == "sqlite":
        # One process, as SQLite is deployed: the in-memory channel layer, no Redis.
        progress(f"  verdict to motion, {sizes.approvals} approvals, worker embedded in daphne...")
        data["motion"] = motion.measure(approvals=sizes.approvals, database_url=url, redis_url="", log_dir=log_dir)
        return data
    env = {**BENCH_ENV, "DEUZ_BENCH_STEPS": str(sizes.throughput_steps),
           "DEUZ_BENCH_TAIL_PARTS": str(sizes.tail_parts), "DEUZ_BENCH_TAIL_INTERVAL_MS": str(sizes.tail_interval_ms),
           "DEUZ_BENCH_TAIL_LEAD_MS": "2000"}
    most_runs = max(sizes.tail_runs, sizes.fanout_runs)
    fleet = Fleet(database_url=url, redis_url=redis_url, log_dir=log_dir, workers=2,
                  concurrency=max(16, -(-most_runs // 2)), env=env, settings_module=BENCH_SETTINGS,
                  app_prefix="deuz-bench-")
    fleet.start()
    try:
        progress(f"  verdict to motion, {sizes.approvals} approvals, worker processes woken by LISTEN/NOTIFY...")
        data["motion"] = motion.measure_on(fleet, approvals=sizes.approvals, embedded=False, redis=bool(redis_url))
        fleet.stop_workers()
        progress(f"  live tail, {sizes.tail_runs} runs streaming at once...")
        data["tail"] = tail.measure_on(fleet, runs=sizes.tail_runs, followers=sizes.tail_runs, label="tail")
        progress(f"  fan-out, {sizes.fanout_followers} followers of {sizes.fanout_runs} runs on one daphne...")
        data["fanout"] = tail.measure_on(fleet, runs=sizes.fanout_runs, followers=sizes.fanout_followers,
                                         label="fanout", bar_ms=tail.FANOUT_BAR_MS)
        progress(f"  throughput, {sizes.throughput_runs} runs of {sizes.throughput_steps} steps, with "
                 f"{', '.join(map(str, throughput.WORKER_COUNTS))} workers...")
        scaled = throughput.scaling(fleet, runs=sizes.throughput_runs, steps=sizes.throughput_steps,
                                    concurrency=sizes.throughput_concurrency)
        data["throughput_scaling"] = scaled
        data["throughput"] = next(part for part in scaled if part["workers"] == 2)  # the figure issue 8 reported
    finally:
        fleet.stop()
    return data
