"""Cancel to stop (issue 22): from a cancel's answer to the stream's ``cancelled`` part at a follower.

One run of ``bench-cancel`` (a long answer, a word every DEUZ_BENCH_CANCEL_INTERVAL_MS) at a time is started
through the API and followed over SSE; once the follower has a text delta (the leg is running, mid-step), the
run is cancelled, and the time from the cancel's answer to the follower's ``cancelled`` part is the figure (it
can be below zero: the part may reach the follower before the answer reaches its client; the time from the
request is kept beside it).
Two doors, ``cancels`` runs each, after one warm-up each:

  api   the run's owner POSTs /api/runs/{id}/cancel/ to daphne; the figure starts at its HTTP answer
  cli   this process calls run_cancel, as `manage.py runs cancel` does from another process; the figure starts
        when it returned (committed)

On SQLite the worker is embedded in daphne (SQLite's deployment): the API's cancel reaches the leg through the
process's own wake-up, the other process's through the leg's poll (every 250 ms). On PostgreSQL with Redis a
`manage.py worker` process runs the leg and hears both by LISTEN/NOTIFY. The lease is the default 15 s, so a
leg that learnt of a cancel at its lease tick (every 5 s) would show. The breakdown, from the database's
timestamps: answer to the cancelled part written, written to received. Bar: p95 <= 1000 ms.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from django.db import connection
from httpx_sse import aconnect_sse

from bench.fleet import BENCH_ENV, BENCH_SETTINGS, Fleet, api_users, closing, runs_delete, start_runs
from bench.stats import percentile, summary

__all__ = ["BAR_MS", "DOORS", "measure", "measure_on"]

BAR_MS = 1000.0
DOORS = ("api", "cli")
_REASON = "bench: cancel to stop"


def measure(*, cancels: int, database_url: str, redis_url: str, log_dir: Path) -> dict[str, Any]:
    """Start the fleet this database calls for, measure ``cancels`` cancels through each door, stop it."""
    embedded = connection.vendor == "sqlite" or not redis_url
    fleet = Fleet(database_url=database_url, redis_url=redis_url if not embedded else "", log_dir=log_dir,
                  workers=0 if embedded else 1, concurrency=4, serve_workers=1 if embedded else 0, env=BENCH_ENV,
                  settings_module=BENCH_SETTINGS, app_prefix="deuz-bench-cancel-")
    fleet.start()
    try:
        return measure_on(fleet, cancels=cancels, embedded=embedded)
    finally:
        fleet.stop()


def measure_on(fleet: Fleet, *, cancels: int, embedded: bool) -> dict[str, Any]:
    """Measure on a running fleet: per door, one warm-up cancel, then ``cancels`` measured ones."""
    prefix = f"bench-cancel-{os.getpid()}-{int(time.time())}-"
    tokens = api_users("bench")
    doors: dict[str, Any] = {}
    try:
        for door in DOORS:
            run_ids = [f"{prefix}{door}-{index}" for index in range(cancels + 1)]
            samples = asyncio.run(closing(_drive(fleet.url, tokens["client"], run_ids, door=door)))[1:]
            doors[door] = _door_figures(door, samples, embedded=embedded)
    finally:
        runs_delete(prefix)
    return {"vendor": connection.vendor, "cancels": cancels, "bar_ms": BAR_MS,
            "worker": "embedded in daphne" if embedded else "a worker process",
            "channel_layer": "in-memory" if embedded else "Redis", "doors": doors}


def _door_figures(door: str, samples: list[dict[str, Any]], *, embedded: bool) -> dict[str, Any]:
    latencies = [sample["latency_ms"] for sample in samples]
    if embedded:
        wake = "in-process wake-up" if door == "api" else "the leg's 250 ms poll"
    else:
        wake = "LISTEN/NOTIFY"
    return {
        "wake": wake, "latency_ms": summary(latencies),
        "p95_ms": percentile(latencies, 95) if latencies else 0.0,
        # The answer can come after the part (the follower heard the leg stop before the API's answer arrived).
        "from_request_p95_ms": percentile([s["from_request_ms"] for s in samples], 95) if samples else 0.0,
        "breakdown_ms": {name: statistics.median(sample[name] for sample in samples) if samples else 0.0
                         for name in ("to_part_written", "written_to_follower")},
        "every_run_cancelled": all(sample["status"] == "cancelled" for sample in samples),
        "cancelled_by": sorted({str(sample["by"]) for sample in samples}),
    }


class _CancelFollower:
    """Follows one run over SSE until [DONE], noting when its first text delta and its ``cancelled`` part came."""

    def __init__(self, base_url: str, token: str, run_id: str) -> None:
        self.url = f"{base_url}api/runs/{run_id}/events/"
        self.token = token
        self.streaming = asyncio.Event()  # a text delta arrived: the leg is mid-step
        self.cancelled: dict[str, Any] | None = None
        self.cancelled_at: float | None = None
        self.cancelled_seq: int | None = None
        self.heard_cancel = asyncio.Event()

    async def follow(self, client: httpx.AsyncClient) -> None:
        headers = {"Authorization": f"Token {self.token}"}
        async with aconnect_sse(client, "GET", self.url, headers=headers,
                                timeout=httpx.Timeout(10, read=60)) as source:
            async for event in source.aiter_sse():
                if not event.data:
                    continue
                if event.data == "[DONE]":
                    return
                part = json.loads(event.data)
                if part.get("type") == "text-delta":
                    self.streaming.set()
                elif part.get("type") == "cancelled":
                    self.cancelled_at, self.cancelled, self.cancelled_seq = time.time(), part, int(event.id)
                    self.heard_cancel.set()


async def _drive(base_url: str, token: str, run_ids: list[str], *, door: str) -> list[dict[str, Any]]:
    from runs.services.lifecycle import run_cancel

    samples = []
    async with httpx.AsyncClient() as client:
        for run_id in run_ids:
            await start_runs(client, base_url, token, agent="bench-cancel", run_ids=[run_id])
            follower = _CancelFollower(base_url, token, run_id)
            following = asyncio.create_task(follower.follow(client))
            await asyncio.wait_for(_first(follower.streaming.wait(), following), 60)
            sent = time.time()
            if door == "api":
                answer = await client.post(f"{base_url}api/runs/{run_id}/cancel/", json={"reason": _REASON},
                                           headers={"Authorization": f"Token {token}"}, timeout=30)
                answered = time.time()
                answer.raise_for_status()
            else:
                await sync_to_async(run_cancel)(run_id=run_id, reason=_REASON)
                answered = time.time()
            await asyncio.wait_for(_first(follower.heard_cancel.wait(), following), 60)
            await asyncio.wait_for(following, 60)  # the stream ends with its [DONE]
            written, status = await sync_to_async(_written_at)(run_id, follower.cancelled_seq)
            samples.append({
                "run_id": run_id, "latency_ms": (follower.cancelled_at - answered) * 1000,
                "from_request_ms": (follower.cancelled_at - sent) * 1000,
                "to_part_written": (written - answered) * 1000,
                "written_to_follower": (follower.cancelled_at - written) * 1000,
                "by": follower.cancelled["by"], "status": status,
            })
    return samples


async def _first(wanted: Any, following: asyncio.Task[None]) -> None:
    """Wait for ``wanted``; a follower that ended first (the stream failed, or ended early) is an error."""
    wanted = asyncio.ensure_future(wanted)
    await asyncio.wait({wanted, following}, return_when=asyncio.FIRST_COMPLETED)
    if not wanted.done():
        wanted.cancel()
        following.result()  # raises what ended the follower
        raise RuntimeError("The stream ended before the part the bench waits for.")


def _written_at(run_id: str, seq: int | None) -> tuple[float, str]:
    from runs.models import JournalEntry, Run

    entry = JournalEntry.objects.get(run__run_id=run_id, seq=seq, is_sentinel=False)
    return entry.created_at.timestamp(), Run.objects.get(run_id=run_id).status
