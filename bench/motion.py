"""Verdict to motion (issue 8, item 4): from a reviewer's verdict's API response to the first part of the
resumed leg at a follower.

Runs of ``bench-approval`` (one gated tool call) are started through the API and left waiting for their
verdicts. Then, one at a time, the reviewer's POST decides one; on its response a follower opens (SSE and
WebSocket in turn) from the run's last journal seq, and the time until its first new part is the figure.
On PostgreSQL a `manage.py worker` process is woken by LISTEN/NOTIFY; on SQLite the worker is embedded in
daphne and woken by the process's own notification (runs.ownership.wakeups). The breakdown, from the database's
timestamps (one clock, one machine): response to the leg's claim, claim to its first part written, written to
received. Bar: p99 < 100 ms.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from django.db import connection

from bench.child_processes import await_until
from bench.fleet import (
    BENCH_ENV,
    BENCH_SETTINGS,
    TERMINAL,
    Fleet,
    Follower,
    api_users,
    closing,
    run_statuses,
    runs_delete,
    start_runs,
)
from bench.stats import summary

__all__ = ["BAR_MS", "measure", "measure_on"]

BAR_MS = 100.0


def measure(*, approvals: int, database_url: str, redis_url: str, log_dir: Path) -> dict[str, Any]:
    """Start the fleet this database calls for, measure ``approvals`` verdicts, stop it."""
    embedded = connection.vendor == "sqlite"
    fleet = Fleet(database_url=database_url, redis_url=redis_url, log_dir=log_dir, workers=0 if embedded else 1,
                  concurrency=8, serve_workers=1 if embedded else 0, env=BENCH_ENV, settings_module=BENCH_SETTINGS,
                  app_prefix="deuz-bench-")
    fleet.start()
    try:
        return measure_on(fleet, approvals=approvals, embedded=embedded, redis=bool(redis_url))
    finally:
        fleet.stop()


def measure_on(fleet: Fleet, *, approvals: int, embedded: bool, redis: bool) -> dict[str, Any]:
    """Measure on a running fleet: one warm-up verdict, then ``approvals`` measured ones."""
    prefix = f"bench-motion-{os.getpid()}-{int(time.time())}-"
    run_ids = [f"{prefix}{index}" for index in range(approvals + 1)]
    tokens = api_users("bench")
    try:
        samples = asyncio.run(closing(_drive(fleet.url, tokens, run_ids)))
        breakdown = _breakdown(samples)
    finally:
        runs_delete(prefix)
    samples = samples[1:]  # the warm-up: the first leg of each process's cold paths
    breakdown = breakdown[1:]
    latencies = [sample["latency_ms"] for sample in samples]
    return {
        "vendor": connection.vendor, "approvals": len(samples), "bar_ms": BAR_MS,
        "worker": "embedded in daphne" if embedded else "a worker process",
        "wake": "in-process notification" if embedded else "LISTEN/NOTIFY",
        "channel_layer": "Redis" if redis else "in-memory",
        "latency_ms": summary(latencies),
        "by_transport": {transport: summary([s["latency_ms"] for s in samples if s["transport"] == transport])
                         for transport in ("sse", "websocket")},
        "breakdown_ms": {name: statistics.median(row[name] for row in breakdown) if breakdown else 0.0
                         for name in ("to_claim", "claim_to_part", "part_to_follower")},
    }


async def _drive(base_url: str, tokens: dict[str, str], run_ids: list[str]) -> list[dict[str, Any]]:
    from approvals.models import ApprovalRequest

    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=50)) as client:
        await start_runs(client, base_url, tokens["client"], agent="bench-approval", run_ids=run_ids)

        def pending() -> dict[str, tuple[str, str]] | None:
            rows = {run_id: (approval_id, token) for run_id, approval_id, token in ApprovalRequest.objects.filter(
                run__run_id__in=run_ids, status="pending").values_list("run__run_id", "approval_id", "token")}
            return rows if len(rows) == len(run_ids) else None

        waiting = await await_until(pending, timeout=120 + len(run_ids), what="every run to wait for its verdict")

        async def is_done(run_id: str) -> bool:
            return (await sync_to_async(run_statuses)([run_id])).get(run_id) in TERMINAL

        samples = []
        for index, run_id in enumerate(run_ids):
            approval_id, token = waiting[run_id]
            cursor = await sync_to_async(_last_seq)(run_id)
            answer = await client.post(f"{base_url}api/runs/{run_id}/approvals/{approval_id}/",
                                       json={"approved": True, "token": token, "reason": "bench"},
                                       headers={"Authorization": f"Token {tokens['reviewer']}"}, timeout=30)
            answered = time.time()
            answer.raise_for_status()
            transport = "sse" if index % 2 == 0 else "websocket"
            follower = Follower(run_id, transport=transport, base_url=base_url, token=tokens["client"],
                                is_done=is_done, cursor=cursor)
            following = asyncio.create_task(follower.follow(client, time.monotonic() + 60))
            await asyncio.wait_for(follower.first_part.wait(), 60)
            first_seq = follower.seqs[0]
            samples.append({"run_id": run_id, "transport": transport, "answered": answered, "first_seq": first_seq,
                            "received": follower.received[first_seq],
                            "latency_ms": (follower.received[first_seq] - answered) * 1000})
            await asyncio.wait_for(following, 60)  # the run finishes before the next verdict
    return samples


def _last_seq(run_id: str) -> int:
    from django.db.models import Max

    from runs.models import JournalEntry

    last = JournalEntry.objects.filter(run__run_id=run_id, is_sentinel=False).aggregate(last=Max("seq"))["last"]
    return -1 if last is None else last


def _breakdown(samples: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Where each verdict's time went, from the verdict leg's claim and its first part's write."""
    from runs.models import JournalEntry, Leg

    rows = []
    for sample in samples:
        leg = Leg.objects.filter(run__run_id=sample["run_id"], kind=Leg.Kind.VERDICT).order_by("number").first()
        part = JournalEntry.objects.filter(run__run_id=sample["run_id"], seq=sample["first_seq"],
                                           is_sentinel=False).first()
        if leg is None or part is None:
            continue
        claimed, written = leg.started_at.timestamp(), part.created_at.timestamp()
        rows.append({"to_claim": (claimed - sample["answered"]) * 1000, "claim_to_part": (written - claimed) * 1000,
                     "part_to_follower": (sample["received"] - written) * 1000})
    return rows
