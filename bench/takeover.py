"""Takeover (issue 25): from the SIGKILL of a worker mid-run to the continuation's first part at a follower.

Two `manage.py worker` processes and a daphne with none (the Redis channel layer, so a follower in daphne hears
a worker process's parts as they are written; on SQLite too). One run of ``bench-cancel`` (a long answer, a word
every DEUZ_BENCH_CANCEL_INTERVAL_MS) at a time is started through the API and followed over SSE; once the
follower has had a few parts (the leg is mid-step), the worker that owns the run is SIGKILLed. The journal's
last part then is the dead leg's last: the figure runs from the kill to the follower's first part after it,
which only the continuation can write. The run is cancelled, the killed worker started again and awaited, and
the next kill comes. Workers keep the project's lease (DEUZ_LEASE_SECONDS, 15 s by default): without liveness
the figure is the lease's lapse, printed beside it as the before. The survivor and daphne's follower both hear
the death (runs.ownership.liveness's watches); whichever claims first continues the run. The breakdown, from the database's timestamps: kill to the recovery leg's
claim, claim to its first part written, written to received. Bar: p99 < 1000 ms.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import socket
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

from bench.child_processes import await_until
from bench.fleet import BENCH_ENV, BENCH_SETTINGS, Fleet, Follower, api_users, closing, runs_delete, start_runs
from bench.stats import summary

__all__ = ["BAR_MS", "measure", "measure_on"]

BAR_MS = 1000.0
#: Parts the follower has before the kill: the leg is streaming its answer.
_PARTS_BEFORE_KILL = 5


def measure(*, kills: int, database_url: str, redis_url: str, log_dir: Path) -> dict[str, Any]:
    """Start daphne and two worker processes, measure ``kills`` takeovers, stop them."""
    fleet = Fleet(database_url=database_url, redis_url=redis_url, log_dir=log_dir, workers=2, concurrency=4,
                  env=BENCH_ENV, settings_module=BENCH_SETTINGS, app_prefix="deuz-bench-takeover-")
    fleet.start()
    try:
        return measure_on(fleet, kills=kills)
    finally:
        fleet.stop()


def measure_on(fleet: Fleet, *, kills: int) -> dict[str, Any]:
    """Measure on a running fleet (two workers or more, daphne with none): one warm-up kill, then ``kills``."""
    prefix = f"bench-takeover-{os.getpid()}-{int(time.time())}-"
    tokens = api_users("bench")
    run_ids = [f"{prefix}{index}" for index in range(kills + 1)]
    try:
        samples = asyncio.run(closing(_drive(fleet, tokens["client"], run_ids)))[1:]
    finally:
        runs_delete(prefix)
    latencies = [sample["latency_ms"] for sample in samples]
    return {
        "vendor": connection.vendor, "kills": len(samples), "bar_ms": BAR_MS,
        "lease_seconds": settings.DEUZ_LEASE_SECONDS, "latency_ms": summary(latencies),
        "breakdown_ms": {name: statistics.median(sample[name] for sample in samples) if samples else 0.0
                         for name in ("to_claim", "claim_to_part", "part_to_follower")},
        "recovered_by": sorted({sample["recovered_by"] for sample in samples}),
        "continued_by": dict(collections.Counter(sample["continued_by"] for sample in samples)),
        # Split by whether the recovery leg was its process's first (a worker restarted after an earlier kill):
        # the whole figure, and claim to first part written.
        "latency_by_leg_ms": {
            name: summary([sample["latency_ms"] for sample in samples if sample["first_leg"] == first])
            for name, first in (("first", True), ("later", False))},
        "claim_to_part_by_leg_ms": {
            name: summary([sample["claim_to_part"] for sample in samples if sample["first_leg"] == first])
            for name, first in (("first", True), ("later", False))},
        "samples": samples,
    }


def _owner_process(fleet: Fleet, worker_id: str) -> str | None:
    """The fleet's name of the worker whose id (host:pid, `manage.py worker`'s default) is ``worker_id``."""
    for name, process in fleet.workers.items():
        if worker_id == f"{socket.gethostname()}:{process.pid}":
            return name
    return None


def _owner(run_id: str) -> tuple[str, int]:
    from runs.models import Run

    return Run.objects.values_list("worker_id", "owner_epoch").get(run_id=run_id)


def _last_seq(run_id: str) -> int:
    from runs.models import JournalEntry

    seqs = JournalEntry.objects.filter(run__run_id=run_id, is_sentinel=False).values_list("seq", flat=True)
    return max(seqs, default=-1)


def _recovery(run_id: str, epoch: int, seq: int) -> dict[str, Any] | None:
    """The leg after ``epoch`` (its claim's time and worker) and when its first part, ``seq``, was written."""
    from runs.models import JournalEntry, Leg

    leg = Leg.objects.filter(run__run_id=run_id, owner_epoch__gt=epoch).order_by("number").first()
    entry = JournalEntry.objects.filter(run__run_id=run_id, seq=seq, is_sentinel=False).first()
    if leg is None or entry is None:
        return None
    # A process's first leg pays for what its first leg warms (the agent's module, the store's connections).
    first = not Leg.objects.filter(worker_id=leg.worker_id, started_at__lt=leg.started_at).exists()
    return {"claimed": leg.started_at.timestamp(), "written": entry.created_at.timestamp(), "kind": leg.kind,
            "by": leg.worker_id, "first_leg": first}


def _cancel(run_id: str) -> None:
    from runs.errors import RunNotResumable
    from runs.services.lifecycle import run_cancel

    try:
        run_cancel(run_id=run_id, reason="bench: takeover measured")
    except RunNotResumable:  # it ended meanwhile
        pass


async def _ready(fleet: Fleet, name: str, timeout: float = 120) -> None:
    """Until the worker ``name`` has said it claims runs (its start-up done), and a moment for its first claim."""
    log = fleet.log_dir / f"{name}.log"
    pid = fleet.workers[name].pid
    await await_until(lambda: f"Worker {socket.gethostname()}:{pid} claiming" in log.read_text(errors="replace"),
                      timeout=timeout, what=f"{name} to start")
    await asyncio.sleep(0.5)


async def _drive(fleet: Fleet, token: str, run_ids: list[str]) -> list[dict[str, Any]]:
    for name in fleet.workers:
        await _ready(fleet, name)
    samples = []
    async with httpx.AsyncClient() as client:
        for run_id in run_ids:
            await start_runs(client, fleet.url, token, agent="bench-cancel", run_ids=[run_id])
            follower = Follower(run_id, transport="sse", base_url=fleet.url, token=token,
                                is_done=sync_to_async(lambda run_id: _status(run_id) in {"cancelled", "completed"}))
            following = asyncio.create_task(follower.follow(client, time.monotonic() + 300))
            await await_until(lambda: len(follower.seqs) >= _PARTS_BEFORE_KILL, timeout=60,
                              what=f"{run_id} to stream", every=0.02)
            worker_id, epoch = await sync_to_async(_owner)(run_id)
            name = _owner_process(fleet, worker_id)
            if name is None:
                raise RuntimeError(f"{run_id} is owned by {worker_id!r}, none of the fleet's workers.")
            killed_at = time.time()
            fleet.workers[name].send_signal(signal.SIGKILL)
            await asyncio.to_thread(fleet.workers[name].wait)
            last = await sync_to_async(_last_seq)(run_id)
            (first,) = await await_until(lambda: _first_after(follower, last), timeout=120,
                                         what=f"the continuation of {run_id} at its follower", every=0.005)
            received = follower.received[first]
            recovery = await await_until(lambda: _recovery(run_id, epoch, first), what=f"{run_id}'s recovery leg")
            samples.append({
                "run_id": run_id, "latency_ms": (received - killed_at) * 1000,
                "to_claim": (recovery["claimed"] - killed_at) * 1000,
                "claim_to_part": (recovery["written"] - recovery["claimed"]) * 1000,
                "part_to_follower": (received - recovery["written"]) * 1000,
                "recovered_by": recovery["kind"],
                # The surviving worker, or daphne's follower (its liveness watch heard the death too).
                "continued_by": "follower" if recovery["by"].endswith((":sse", ":ws")) else "worker",
                "first_leg": recovery["first_leg"],
            })
            await sync_to_async(_cancel)(run_id)
            await asyncio.wait_for(following, 60)
            fleet.start_worker(name)
            await _ready(fleet, name)
    return samples


def _first_after(follower: Follower, last: int) -> tuple[int] | None:
    """The first seq the follower received after ``last`` (the continuation's first part), once there is one."""
    later = [seq for seq in follower.seqs if seq > last]
    return (min(later),) if later else None


def _status(run_id: str) -> str:
    from runs.models import Run

    return Run.objects.values_list("status", flat=True).get(run_id=run_id)
