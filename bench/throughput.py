"""Throughput on the scale-out path (issue 8, item 6; issue 25): ``runs`` runs of DEUZ_BENCH_STEPS steps (the
bench workload: one tool call a step, ~300 bytes of JSON) queued at once and drained by the fleet's `manage.py
worker` processes on PostgreSQL; ``scaling`` does it with 1, 2 and 4 of them.

The window is the database's own: from the first leg's claim to the last leg's end. The CPU the run took: each
worker process's, and each of their PostgreSQL backends' (read from pg_stat_activity's pids just before the
workers stop), per step. Then the books: every run completed with exactly its steps (its step index, one leg,
each step's start and finish parts and each tool call's result once in its journal), and every journal's seqs
gapless from 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Max, Min
from django.test import override_settings

from bench.bench_agents import AGENTS
from bench.child_processes import await_until
from bench.fleet import TERMINAL, Fleet, closing, run_statuses, runs_delete
from runs.secrets.sealing import unseal_text

__all__ = ["WORKER_COUNTS", "measure_on", "scaling"]

WORKER_COUNTS = (1, 2, 4)


def scaling(fleet: Fleet, *, runs: int, steps: int, concurrency: int, counts: tuple[int, ...] = WORKER_COUNTS,
            timeout: float = 900) -> list[dict[str, Any]]:
    """The same load drained by each number of worker processes in ``counts``, one after the other."""
    kept = fleet.worker_count
    measured = []
    try:
        for count in counts:
            fleet.worker_count = count
            measured.append(measure_on(fleet, runs=runs, steps=steps, concurrency=concurrency, timeout=timeout))
    finally:
        fleet.worker_count = kept
    return measured


def _backend_cpu_seconds(fleet: Fleet) -> float:
    """User + system CPU of the PostgreSQL backends of the fleet's workers (this machine's server only)."""
    import psutil

    if connection.vendor != "postgresql":
        return 0.0
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s",
                       [f"{fleet.app_prefix}worker-%"])
        pids = [pid for (pid,) in cursor.fetchall()]
    used = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:  # another host's server, or a backend that just ended
            continue
        used += times.user + times.system
    return used


def measure_on(fleet: Fleet, *, runs: int, steps: int, concurrency: int, timeout: float = 900) -> dict[str, Any]:
    """On a fleet whose workers are stopped (their DEUZ_BENCH_STEPS must be ``steps``): queue the runs, start
    the workers with ``concurrency`` legs each, wait, stop them, check the books."""
    from runs.models import Leg, Run
    from runs.services.lifecycle import run_start

    prefix = f"bench-throughput-{os.getpid()}-{int(time.time())}-"
    run_ids = [f"{prefix}{index}" for index in range(runs)]
    try:
        with override_settings(DEUZ_AGENTS={**settings.DEUZ_AGENTS, **AGENTS}):
            for run_id in run_ids:
                run_start(agent="bench-steps", messages=[{"role": "user", "content": "Check every record."}],
                          run_id=run_id)
        fleet.concurrency = concurrency
        cpu_before = fleet.cpu_seconds()
        fleet.start_workers()
        try:
            asyncio.run(closing(await_until(lambda: all(s in TERMINAL for s in run_statuses(run_ids).values()),
                                   timeout=timeout, what="every throughput run to finish", every=0.25)))
            cpu = {name: seconds - cpu_before.get(name, 0.0) for name, seconds in fleet.cpu_seconds().items()}
            cpu["database (the workers' backends)"] = _backend_cpu_seconds(fleet)
        finally:
            fleet.stop_workers()
        legs = Leg.objects.filter(run__run_id__startswith=prefix)
        window = legs.aggregate(first=Min("started_at"), last=Max("ended_at"))
        seconds = (window["last"] - window["first"]).total_seconds()
        books = _books(prefix, steps)
        statuses = defaultdict(int)
        for status in Run.objects.filter(run_id__startswith=prefix).values_list("status", flat=True):
            statuses[status] += 1
    finally:
        runs_delete(prefix)
    workers_cpu = sum(value for name, value in cpu.items() if name.startswith("worker-"))
    database_cpu = cpu["database (the workers' backends)"]
    return {
        "vendor": connection.vendor, "runs": runs, "steps": steps, "workers": fleet.worker_count,
        "concurrency": concurrency, "seconds": seconds, "runs_per_second": runs / seconds,
        "steps_per_second": runs * steps / seconds, "statuses": dict(statuses), "cpu_seconds": cpu,
        "cpu_ms_per_step": {"workers": workers_cpu * 1000 / (runs * steps),
                            "database": database_cpu * 1000 / (runs * steps),
                            "total": (workers_cpu + database_cpu) * 1000 / (runs * steps)},
        "cores_busy": (workers_cpu + database_cpu) / seconds if seconds else 0.0, "cpus": os.cpu_count(), **books,
    }


def _books(prefix: str, steps: int) -> dict[str, Any]:
    """Lost and repeated steps, from the runs, their legs and their journals."""
    from runs.models import JournalEntry, Leg, Run

    expected = {"step-start": steps, "step-finish": steps, "tool-result": steps - 1}
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    seqs: dict[str, list[int]] = defaultdict(list)
    for run_id, seq, part in (JournalEntry.objects.filter(run__run_id__startswith=prefix, is_sentinel=False)
                              .order_by("run_id", "seq").values_list("run__run_id", "seq", "part")):
        seqs[run_id].append(seq)
        kind = json.loads(unseal_text(part)).get("type")
        if kind in expected:
            counts[run_id][kind] += 1
    runs = dict(Run.objects.filter(run_id__startswith=prefix).values_list("run_id", "step_index"))
    legs = defaultdict(int)
    for run_id in Leg.objects.filter(run__run_id__startswith=prefix).values_list("run__run_id", flat=True):
        legs[run_id] += 1
    lost = repeated = 0
    for run_id in runs:
        for kind, want in expected.items():
            got = counts[run_id][kind]
            lost += max(0, want - got)
            repeated += max(0, got - want)
    return {
        "journal_gaps": sum(found != list(range(len(found))) for found in seqs.values()),
        "runs_with_wrong_steps": sum(index != steps - 1 for index in runs.values()),
        "steps_lost": lost, "steps_repeated": repeated,
        "legs_beyond_one": sum(count - 1 for count in legs.values()),
    }
