"""Load with faults: many runs of the demo agents across worker processes and one daphne, followers on their
streams, approvals answered through the API, while a chaos loop SIGKILLs a worker every few seconds and
restarts it. Then the books are checked: every run finished, no effect happened twice, no journal part was
lost or repeated (in the journal or at a follower), and how long recoveries took.

Driven by `manage.py load` (PostgreSQL and Redis, since it needs more than one process); a soak mode keeps a
steady load for a while and samples each process's memory, to show whether it levels off.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from asgiref.sync import sync_to_async

from bench.fleet import Fleet, Follower, ProcessStats, api_users

__all__ = ["LoadConfig", "LoadReport", "load_run"]

TERMINAL = {"completed", "failed", "cancelled", "needs_review"}


@dataclass(frozen=True, kw_only=True)
class LoadConfig:
    runs: int = 200
    followers: int = 100
    workers: int = 2
    concurrency: int = 16
    kill_every: float = 5.0  # seconds between SIGKILLs; 0: no chaos
    timeout: float = 900.0
    soak_seconds: float = 0.0  # >0: keep starting runs for this long, sampling memory
    lease_seconds: int = 3
    delay_ms: int = 5
    database_url: str = ""
    redis_url: str = ""


@dataclass
class LoadReport:
    runs_started: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    parts_delivered: int = 0
    followers_complete: int = 0
    lost_at_followers: int = 0
    repeated_at_followers: int = 0
    repeats_by_transport: dict[str, int] = field(default_factory=dict)
    stream_errors: dict[str, int] = field(default_factory=dict)
    journal_gaps: int = 0
    duplicate_effects: int = 0
    payments: int = 0
    kills: int = 0
    recoveries: int = 0
    max_recovery_seconds: float = 0.0
    seconds: float = 0.0
    processes: dict[str, ProcessStats] = field(default_factory=dict)

    @property
    def is_clean(self) -> bool:
        finished = sum(self.statuses.get(status, 0) for status in TERMINAL)
        return (finished == self.runs_started and self.lost_at_followers == 0 and self.repeated_at_followers == 0
                and self.journal_gaps == 0 and self.duplicate_effects == 0)


def _run_statuses(run_ids: list[str]) -> dict[str, str]:
    from runs.models import Run

    return dict(Run.objects.filter(run_id__in=run_ids).values_list("run_id", "status"))


async def _approve_pending(client: httpx.AsyncClient, base_url: str, token: str, run_ids: set[str]) -> None:
    from approvals.models import ApprovalRequest

    pending = await sync_to_async(list)(
        ApprovalRequest.objects.filter(status="pending", run__run_id__in=run_ids)
        .values_list("run__run_id", "approval_id", "input_data")[:200]
    )
    for run_id, approval_id, _ in pending:
        row = await ApprovalRequest.objects.aget(run__run_id=run_id, approval_id=approval_id)
        try:
            await client.post(f"{base_url}api/runs/{run_id}/approvals/{approval_id}/",
                              json={"approved": True, "token": row.token, "reason": "load test"},
                              headers={"Authorization": f"Token {token}"}, timeout=30)
        except httpx.HTTPError:
            pass  # the next round asks again


async def _drive(config: LoadConfig, fleet: Fleet, tokens: dict[str, str], report: LoadReport,
                 progress: Callable[[str], None]) -> list[Follower]:
    base = fleet.url
    started = time.monotonic()
    deadline = started + config.timeout + config.soak_seconds
    run_ids: list[str] = []
    limits = httpx.Limits(max_connections=config.followers + 50, max_keepalive_connections=50)
    async with httpx.AsyncClient(limits=limits) as client:

        async def start_run(index: int) -> str:
            agent = "coder" if index % 4 == 3 else "reimbursement"
            text = "Fix the failing test." if agent == "coder" else f"Reimburse {('exp-1042', 'exp-2077')[index % 2]}"
            run_id = f"load-{os.getpid()}-{index}"
            answer = await client.post(f"{base}api/runs/", json={"agent": agent, "run_id": run_id,
                                                               "messages": [{"role": "user", "content": text}]},
                                       headers={"Authorization": f"Token {tokens['client']}"}, timeout=30)
            answer.raise_for_status()
            return run_id

        async def is_done(run_id: str) -> bool:
            return (await sync_to_async(_run_statuses)([run_id])).get(run_id) in TERMINAL

        run_ids += await asyncio.gather(*(start_run(index) for index in range(config.runs)))
        report.runs_started = len(run_ids)
        followers = [Follower(run_id, transport="sse" if index % 2 == 0 else "websocket", base_url=base,
                              token=tokens["client"], is_done=is_done)
                     for index, run_id in enumerate(run_ids[: config.followers])]
        following = [asyncio.create_task(follower.follow(client, deadline)) for follower in followers]

        async def chaos() -> None:
            while config.kill_every > 0:
                await asyncio.sleep(config.kill_every)
                name = await asyncio.to_thread(fleet.kill_one)
                report.kills += 1
                progress(f"  chaos: SIGKILLed {name} and restarted it (kill {report.kills})")

        chaos_task = asyncio.create_task(chaos())
        next_report, next_index = 0.0, config.runs
        while time.monotonic() < deadline:
            await asyncio.to_thread(fleet.sample)
            await _approve_pending(client, base, tokens["reviewer"], set(run_ids))
            statuses = await sync_to_async(_run_statuses)(run_ids)
            finished = sum(status in TERMINAL for status in statuses.values())
            soaking = time.monotonic() - started < config.soak_seconds
            if soaking and len(run_ids) - finished < config.runs:  # keep the load steady while soaking
                fresh = await asyncio.gather(*(start_run(next_index + i) for i in range(config.runs // 4 or 1)))
                run_ids += fresh
                next_index += len(fresh)
                report.runs_started = len(run_ids)
            if time.monotonic() >= next_report:
                next_report = time.monotonic() + 5
                progress(f"  {time.monotonic() - started:5.0f} s: {finished}/{len(run_ids)} runs finished, "
                         f"{sum(len(f.seqs) for f in followers)} parts delivered, {report.kills} kills")
            if not soaking and finished == len(run_ids) and all(task.done() for task in following):
                break
            await asyncio.sleep(0.5)
        chaos_task.cancel()
        for task in following:
            task.cancel()
        await asyncio.gather(chaos_task, *following, return_exceptions=True)
    report.seconds = time.monotonic() - started
    report.statuses = dict(sorted(_count(await sync_to_async(_run_statuses)(run_ids)).items()))
    return followers


def _count(statuses: dict[str, str]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for status in statuses.values():
        counts[status] += 1
    return counts


def _check_books(report: LoadReport, followers: list[Follower], run_prefix: str) -> None:
    """Journal gaps, follower losses and repeats, duplicate payments, recovery times."""
    from django.db.models import Max, Min

    from demo.models import SandboxPayment
    from runs.models import Effect, JournalEntry, Leg

    journals: dict[str, list[int]] = defaultdict(list)
    for run_id, seq in (JournalEntry.objects.filter(run__run_id__startswith=run_prefix, is_sentinel=False)
                        .order_by("run_id", "seq").values_list("run__run_id", "seq")):
        journals[run_id].append(seq)
    report.journal_gaps = sum(seqs != list(range(len(seqs))) for seqs in journals.values())
    for follower in followers:
        expected = journals.get(follower.run_id, [])
        report.parts_delivered += len(follower.seqs)
        repeats = len(follower.seqs) - len(set(follower.seqs))
        report.repeated_at_followers += repeats
        if repeats:
            report.repeats_by_transport[follower.transport] = report.repeats_by_transport.get(follower.transport, 0) + repeats
        report.lost_at_followers += len(set(expected) - set(follower.seqs)) if follower.complete else 0
        report.followers_complete += follower.complete
        for name in follower.errors:
            report.stream_errors[name] = report.stream_errors.get(name, 0) + 1
    # The load's runs pay two expenses, each a business operation (pay_expense:<expense>-v1) shared by every run
    # that pays it: one payment per expense, whichever run made it; any more is a duplicate.
    operations = Effect.objects.filter(run__run_id__startswith=run_prefix).values("operation_id")
    payments = SandboxPayment.objects.filter(operation_id__in=operations)
    report.payments = payments.count()
    per_expense: dict[str, int] = defaultdict(int)
    for request in payments.values_list("request", flat=True):
        per_expense[request.get("expense_id", "")] += 1
    report.duplicate_effects = sum(count - 1 for count in per_expense.values() if count > 1)
    # Recovery time: from the dead leg's last journal write to the recovery leg's first one.
    legs = Leg.objects.filter(run__run_id__startswith=run_prefix).order_by("run_id", "number")
    by_run: dict[int, list[Leg]] = defaultdict(list)
    for leg in legs:
        by_run[leg.run_id].append(leg)
    for run_legs in by_run.values():
        for previous, leg in zip(run_legs, run_legs[1:]):
            if leg.kind != Leg.Kind.RECOVERY:
                continue
            report.recoveries += 1
            last = JournalEntry.objects.filter(run_id=leg.run_id, owner_epoch=previous.owner_epoch).aggregate(
                at=Max("created_at"))["at"] or previous.started_at
            first = JournalEntry.objects.filter(run_id=leg.run_id, owner_epoch=leg.owner_epoch).aggregate(
                at=Min("created_at"))["at"] or leg.started_at
            report.max_recovery_seconds = max(report.max_recovery_seconds, (first - last).total_seconds())


def load_run(config: LoadConfig, *, log_dir: Path, progress: Callable[[str], None] = print) -> LoadReport:
    """Run the load with faults and check the books; the processes are stopped whatever happens."""
    report = LoadReport()
    tokens = api_users("load")
    fleet = Fleet(database_url=config.database_url, redis_url=config.redis_url, log_dir=log_dir,
                  workers=config.workers, concurrency=config.concurrency,
                  env={"DEUZ_LEASE_SECONDS": str(config.lease_seconds), "DEUZ_DEMO_DELAY_MS": str(config.delay_ms)})
    progress(f"Starting daphne and {config.workers} workers (logs in {log_dir})")
    fleet.start()
    try:
        progress(f"Serving at {fleet.url}; starting {config.runs} runs, {config.followers} followers, "
                 f"a SIGKILL every {config.kill_every:g} s")
        followers = asyncio.run(_drive(config, fleet, tokens, report, progress))
    finally:
        fleet.stop()
    _check_books(report, followers, f"load-{os.getpid()}-")
    report.processes = dict(fleet.stats)
    return report


def soak_verdict(samples: list[tuple[float, int]]) -> str:
    """Whether memory levelled off: the last third's peak within 10% of the middle third's."""
    if len(samples) < 9:
        return "too few samples"
    third = len(samples) // 3
    middle = max(rss for _, rss in samples[third: 2 * third])
    last = max(rss for _, rss in samples[2 * third:])
    return "levels off" if last <= middle * 1.10 else f"still growing ({last / middle:.2f}x)"
