"""The effect ledger's measures (the third design document's release proof): duplicate effects, the age of the
oldest unknown outcome, recovery completion time, expired approvals, manual reconciliations. Shown at
``GET /api/metrics/``; composed here because it reads both the runs ledger and the approvals.

- duplicate effects: operations whose tool returned success more than once, plus, per run, committed
  operations beyond the first with the same fingerprint (the same request performed under two operation ids);
- oldest unknown outcome: the age of the oldest effect whose outcome is unknown or needs review;
- recovery completion time: for each recovery (a recovery leg: a new owner continuing a run whose worker died),
  from the dead leg's last sign of life (its last journal part or checkpoint; its start when it wrote none) to
  the run's first confirmed point under the new owner (the recovery leg's first checkpoint, or its end if it
  ended first). A recovery still under way is not counted yet. Every recovery counts, whether or not an effect
  was in doubt (issue 24: this was once the next measure, and read 1 after 3 recoveries);
- reconciliation completion time: for each effect whose outcome was established by reconciliation or a person,
  from its first attempt to that outcome;
- expired approvals: requests that expired before anyone decided (stored as expired, or pending past expiry);
- manual reconciliations: resolutions people made (retry, commit, abandon);
- cross-run replays: times a run reached a business operation another run had performed, and got its recorded
  result instead of performing it again (``Effect(operation_key=...)``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from approvals.models import ApprovalRequest
from runs.models import Checkpoint, Effect, EffectTransition, JournalEntry, Leg
from runs.selectors import effects_stop_list

__all__ = ["effect_metrics", "recovery_seconds"]

_OUTCOMES = {Effect.Status.COMMITTED, Effect.Status.VERIFIED, Effect.Status.FAILED}


def _duplicate_effects() -> int:
    repeated = (
        EffectTransition.objects.filter(to_status=Effect.Status.COMMITTED, via="tool")
        .values("effect").annotate(times=Count("id")).filter(times__gt=1).count()
    )
    same_request = (
        Effect.objects.filter(status__in=[Effect.Status.COMMITTED, Effect.Status.VERIFIED])
        .values("run", "tool_name", "fingerprint").annotate(times=Count("id")).filter(times__gt=1)
    )
    return repeated + sum(group["times"] - 1 for group in same_request)


def recovery_seconds(limit: int = 1000) -> list[float]:
    """For the latest ``limit`` recovery legs whose recovery completed, from the dead leg's last sign of life to
    the recovery leg's first checkpoint or its end, whichever came first."""
    recoveries = list(Leg.objects.filter(kind=Leg.Kind.RECOVERY).order_by("-id")
                      .values_list("run_id", "number", "owner_epoch", "ended_at")[:limit])
    runs = {run_id for run_id, *_ in recoveries}
    legs = {(run_id, number): (epoch, started_at, ended_at) for run_id, number, epoch, started_at, ended_at
            in Leg.objects.filter(run_id__in=runs).values_list("run_id", "number", "owner_epoch", "started_at",
                                                               "ended_at")}
    last_seen: dict[tuple[int, int], datetime] = {}
    first_checkpoint: dict[tuple[int, int], datetime] = {}
    for model, field in ((JournalEntry, "created_at"), (Checkpoint, "recorded_at")):
        rows = (model.objects.filter(run_id__in=runs).values("run_id", "owner_epoch")
                .annotate(last=Max(field), first=Min(field)).order_by())
        for row in rows:
            key = (row["run_id"], row["owner_epoch"])
            last_seen[key] = max(row["last"], last_seen.get(key, row["last"]))
            if model is Checkpoint:
                first_checkpoint[key] = row["first"]
    seconds = []
    for run_id, number, epoch, ended_at in recoveries:
        dead = legs.get((run_id, number - 1))
        confirmed = [at for at in (first_checkpoint.get((run_id, epoch)), ended_at) if at is not None]
        if dead is None or not confirmed:
            continue
        dead_epoch, dead_started_at, dead_ended_at = dead
        death = dead_ended_at or last_seen.get((run_id, dead_epoch), dead_started_at)
        seconds.append(max((min(confirmed) - death).total_seconds(), 0.0))
    return seconds


def _reconciliation_seconds(limit: int = 1000) -> list[float]:
    """From the first attempt to the outcome, for the latest ``limit`` effects recovered by reconciliation or a
    person."""
    recovered = list(
        Effect.objects.filter(outcome_source__in=[Effect.Source.RECONCILIATION, Effect.Source.PERSON])
        .order_by("-id").values_list("pk", flat=True)[:limit]
    )
    first_attempt: dict[int, datetime] = {}
    outcome_at: dict[int, datetime] = {}
    rows = EffectTransition.objects.filter(effect_id__in=recovered).order_by("id").values_list(
        "effect_id", "to_status", "via", "at"
    )
    for effect_id, to_status, via, at in rows:
        if to_status == Effect.Status.ATTEMPTED:
            first_attempt.setdefault(effect_id, at)
        elif to_status in _OUTCOMES and via not in {"tool", "verify"} and effect_id not in outcome_at:
            outcome_at[effect_id] = at
    return [
        (outcome_at[pk] - first_attempt[pk]).total_seconds() for pk in recovered
        if pk in outcome_at and pk in first_attempt
    ]


def _summary(seconds: list[float]) -> dict[str, Any]:
    return {"count": len(seconds), "mean": sum(seconds) / len(seconds) if seconds else None,
            "max": max(seconds) if seconds else None}


def effect_metrics(*, now: datetime | None = None) -> dict[str, Any]:
    """The ledger's measures as of ``now`` (module docstring), plus the count of effects in each state and the
    stop switches that are on."""
    now = now or timezone.now()
    oldest = Effect.objects.filter(
        status__in=[Effect.Status.UNKNOWN, Effect.Status.NEEDS_REVIEW], unknown_since__isnull=False
    ).aggregate(since=Min("unknown_since"))["since"]
    recovery = recovery_seconds()
    reconciliation = _reconciliation_seconds()
    by_status = dict(Effect.objects.values_list("status").annotate(count=Count("id")).order_by())
    return {
        "duplicate_effects": _duplicate_effects(),
        "oldest_unknown_outcome_seconds": None if oldest is None else max((now - oldest).total_seconds(), 0.0),
        "unknown_outcomes": sum(by_status.get(status, 0) for status in (Effect.Status.UNKNOWN,
                                                                         Effect.Status.NEEDS_REVIEW)),
        "recovery_completion_seconds": _summary(recovery),
        "reconciliation_completion_seconds": _summary(reconciliation),
        "expired_approvals": ApprovalRequest.objects.filter(
            Q(status=ApprovalRequest.Status.EXPIRED)
            | Q(status=ApprovalRequest.Status.PENDING, expires_at__lte=now)
        ).count(),
        "manual_reconciliations": EffectTransition.objects.filter(actor_kind=EffectTransition.Actor.PERSON).count(),
        "cross_run_replays": EffectTransition.objects.filter(via="replay").count(),
        "effects_by_status": {status: by_status.get(status, 0) for status in Effect.Status.values},
        "effects_stopped": [
            {"agent": switch.agent or None, "reason": switch.reason, "since": switch.changed_at.isoformat(),
             "by": switch.changed_by.get_username() if switch.changed_by else None}
            for switch in effects_stop_list()
        ],
    }
