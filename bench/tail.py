"""The live tail and fan-out (issue 8, item 5), through daphne and the Redis channel layer.

Runs of ``bench-tail`` (one answer streamed word by word, DEUZ_BENCH_TAIL_INTERVAL_MS apart) are queued while
no worker runs; their followers (SSE and WebSocket in turn) connect and wait; then the workers start, and
every run streams at once. A part's latency is its arrival at the follower minus its journal row's
``created_at`` (the append, just before its commit; one clock, one machine). Parts a follower got by replay
(written before its stream opened) are counted for completeness, not for latency.

  tail     ``runs`` runs, one follower each: p99 < 20 ms (issue 25; issue 8's bar was 50)
  fan-out  ``followers`` followers over ``runs`` runs on the one daphne: every follower receives every part;
           p99 < 50 ms (issue 25), and daphne's peak RSS (sampled every 0.1 s) beside its RSS before the
           followers connected
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import defaultdict
from typing import Any

import httpx
import psutil
from asgiref.sync import sync_to_async

from bench.child_processes import await_until
from bench.fleet import (
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

__all__ = ["FANOUT_BAR_MS", "TAIL_BAR_MS", "measure_on"]

TAIL_BAR_MS = 20.0
FANOUT_BAR_MS = 50.0


def measure_on(fleet: Fleet, *, runs: int, followers: int, label: str, bar_ms: float = TAIL_BAR_MS,
               timeout: float = 300) -> dict[str, Any]:
    """On a fleet whose daphne runs and whose workers are stopped: ``followers`` followers over ``runs`` runs,
    the workers started once all are connected, and stopped again at the end."""
    prefix = f"bench-{label}-{os.getpid()}-{int(time.time())}-"
    run_ids = [f"{prefix}{index}" for index in range(runs)]
    tokens = api_users("bench")
    sampler = _RssSampler(fleet.server.pid)
    try:
        followed, cpu, seconds = asyncio.run(closing(_drive(fleet, tokens, run_ids, followers, sampler, timeout)))
        journals = _journals(prefix)
    finally:
        fleet.stop_workers()
        sampler.stop()
        runs_delete(prefix)
    latencies, replayed, incomplete, missing, repeated = [], 0, 0, 0, 0
    for follower in followed:
        expected = journals.get(follower.run_id, {})
        missing += len(set(expected) - set(follower.seqs))
        repeated += len(follower.seqs) - len(set(follower.seqs))
        incomplete += not follower.complete or set(expected) != set(follower.seqs)
        for seq, received in follower.received.items():
            written = expected.get(seq)
            if written is None:
                continue
            if follower.connected_at is None or written < follower.connected_at:
                replayed += 1
            else:
                latencies.append((received - written) * 1000)
    return {
        "runs": runs, "followers": len(followed),
        "transports": {"sse": sum(f.transport == "sse" for f in followed),
                       "websocket": sum(f.transport == "websocket" for f in followed)},
        "parts_per_run": max((len(seqs) for seqs in journals.values()), default=0),
        "latency_ms": summary(latencies), "replayed_parts": replayed,
        "followers_incomplete": incomplete, "parts_missing": missing, "parts_repeated": repeated,
        "every_part_delivered": incomplete == 0 and missing == 0 and repeated == 0 and bool(followed),
        "server_rss_before": sampler.first, "server_rss_peak": sampler.peak,
        "cpu_seconds": cpu, "seconds": seconds, "bar_ms": bar_ms,
    }


async def _drive(fleet: Fleet, tokens: dict[str, str], run_ids: list[str], count: int, sampler: _RssSampler,
                 timeout: float) -> tuple[list[Follower], dict[str, float], float]:
    base = fleet.url

    async def is_done(run_id: str) -> bool:
        return (await sync_to_async(run_statuses)([run_id])).get(run_id) in TERMINAL

    limits = httpx.Limits(max_connections=count + 50, max_keepalive_connections=count + 50)
    async with httpx.AsyncClient(limits=limits) as client:
        await start_runs(client, base, tokens["client"], agent="bench-tail", run_ids=run_ids)
        sampler.start()
        followers = [Follower(run_ids[index % len(run_ids)], transport="sse" if index % 2 == 0 else "websocket",
                              base_url=base, token=tokens["client"], is_done=is_done) for index in range(count)]
        deadline = time.monotonic() + timeout
        gate = asyncio.Semaphore(50)  # connect a few at a time, as clients arrive, not 500 handshakes at once

        async def follow(follower: Follower) -> None:
            async with gate:
                task = asyncio.create_task(follower.follow(client, deadline))
                while follower.connected_at is None and not task.done():
                    await asyncio.sleep(0.01)
            await task

        following = [asyncio.create_task(follow(follower)) for follower in followers]
        connect_by = time.monotonic() + 60 + count / 5
        while not all(f.connected_at for f in followers) and time.monotonic() < connect_by:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # the last followers' streams reach their tail (subscribed, journal read)
        cpu_before, own_before = fleet.cpu_seconds(), _own_cpu()
        started = time.monotonic()
        await asyncio.to_thread(fleet.start_workers)
        await await_until(lambda: all(status in TERMINAL for status in run_statuses(run_ids).values()),
                         timeout=timeout, what="every tail run to finish", every=0.2)
        # The followers end after the runs: each asks once more and sees the end (longer on a loaded machine).
        await asyncio.wait_for(asyncio.gather(*following, return_exceptions=True), 60 + count / 2)
        seconds = time.monotonic() - started
        cpu_after = fleet.cpu_seconds()
        cpu = {"server": cpu_after.get("server", 0.0) - cpu_before.get("server", 0.0),
               "workers": sum(value for name, value in cpu_after.items() if name != "server"),
               "followers (this process)": _own_cpu() - own_before}
    return followers, cpu, seconds


def _own_cpu() -> float:
    times = psutil.Process().cpu_times()
    return times.user + times.system


def _journals(prefix: str) -> dict[str, dict[int, float]]:
    """Each run's parts: seq -> when it was appended (wall-clock seconds)."""
    from runs.models import JournalEntry

    journals: dict[str, dict[int, float]] = defaultdict(dict)
    for run_id, seq, created_at in JournalEntry.objects.filter(run__run_id__startswith=prefix, is_sentinel=False) \
            .values_list("run__run_id", "seq", "created_at"):
        journals[run_id][seq] = created_at.timestamp()
    return journals


class _RssSampler:
    """A process's resident memory every 0.1 s on a thread: the first sample and the peak."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.first = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.first = self._sample()
        self._thread.start()

    def _sample(self) -> int:
        try:
            rss = self.process.memory_info().rss
        except psutil.Error:
            return 0
        self.peak = max(self.peak, rss)
        return rss

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self._sample()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1)
