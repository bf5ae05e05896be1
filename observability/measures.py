"""The measures of ``GET /metrics``, read from stored rows.

Durable facts (runs, steps, legs, tokens, cost, effects, approvals, replays, recoveries, the outbox, and the model
and tool calls and step durations the journals told: observability.tallies) are counted from the database, not
from this process's memory: every web server and worker reads the same figures, a SIGKILL
loses none, and pruning keeps them (a pruned run keeps its row, its step index and its usage). Only what lives in
one process (its open streams) is measured there, and its help text says so.

Every label is low-cardinality: a status, an agent, a leg kind, a token kind, a channel; never a run id.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from django.db.models import Count, F, FloatField, IntegerField, Min, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from approvals.models import ApprovalRequest
from notifications.models import OutboxMessage
from observability.models import Tally
from observability.tallies import STEP_BUCKETS
from runs.models import Leg, Run
from runs.presenters.metrics import effect_metrics, recovery_seconds
from runs.runtime.usage import CACHE_KEYS
from runs.wire.followers import open_followers

__all__ = ["RECOVERY_BUCKETS", "durable_measures", "process_measures"]

#: Seconds from a leg's last sign of life to its continuation's start: the lease lapses in 15 s by default.
RECOVERY_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0)
#: The token kinds a stored usage can hold.
TOKEN_KINDS = ("input_tokens", "output_tokens", *CACHE_KEYS)
#: At most this many of the latest recovery legs are timed for the histogram (a scrape stays one cheap query).
RECOVERY_WINDOW = 10_000


def _age(since: datetime | None, now: datetime) -> float:
    return 0.0 if since is None else max((now - since).total_seconds(), 0.0)


def _runs(now: datetime) -> Iterator[Metric]:
    runs = GaugeMetricFamily("deuz_runs", "Runs by status and agent.", labels=["status", "agent"])
    for row in Run.objects.values("status", "agent").annotate(count=Count("id")).order_by("status", "agent"):
        runs.add_metric([row["status"], row["agent"]], row["count"])
    yield runs
    queued = Run.objects.filter(status=Run.Status.QUEUED).aggregate(count=Count("id"), since=Min("updated_at"))
    yield GaugeMetricFamily("deuz_queue_depth", "Runs queued for a worker (retries waiting for their time "
                            "included).", value=queued["count"])
    yield GaugeMetricFamily("deuz_queue_oldest_age_seconds", "How long the longest-queued run has waited; 0 "
                            "when none is queued.", value=_age(queued["since"], now))
    steps = Run.objects.filter(step_index__gte=0).aggregate(steps=Sum(F("step_index") + 1))["steps"] or 0
    yield CounterMetricFamily("deuz_steps", "Steps of the runs kept (their top-level agents'), each closed by a "
                              "checkpoint.", value=steps)


def _usage() -> Iterator[Metric]:
    sums = Run.objects.aggregate(
        **{kind: Sum(Cast(KT(f"usage__{kind}"), IntegerField())) for kind in TOKEN_KINDS},
        cost=Sum(Cast(KT("usage__cost"), FloatField())),
    )
    tokens = CounterMetricFamily("deuz_model_tokens", "Model tokens over every run kept, by kind (input counts "
                                 "cached tokens too; cache_read and cache_write say how many).", labels=["kind"])
    for kind in TOKEN_KINDS:
        tokens.add_metric([kind.removesuffix("_tokens")], sums[kind] or 0)
    yield tokens
    yield CounterMetricFamily("deuz_model_cost_dollars", "What the model calls of every run kept cost, at the "
                              "price table's rates (US dollars).", value=sums["cost"] or 0.0)


def _legs() -> Iterator[Metric]:
    legs = CounterMetricFamily("deuz_legs", "Legs started, by kind (recovery: a dead owner's run continued).",
                               labels=["kind"])
    counts = dict(Leg.objects.values_list("kind").annotate(count=Count("id")).order_by())
    for kind in Leg.Kind.values:
        legs.add_metric([kind], counts.get(kind, 0))
    yield legs
    yield _recovery_histogram()


def _recovery_histogram() -> Metric:
    """Each recovery's time, as ``GET /api/metrics/`` measures it (runs.presenters.metrics.recovery_seconds)."""
    seconds = recovery_seconds(limit=RECOVERY_WINDOW)
    counts = [sum(1 for value in seconds if value <= bound) for bound in RECOVERY_BUCKETS]
    histogram = HistogramMetricFamily(
        "deuz_recovery_seconds", "From a dead leg's last sign of life to the first checkpoint (or the end) of the leg "
        f"that continued it (the latest {RECOVERY_WINDOW} recoveries).",
    )
    histogram.add_metric([], [*[(str(bound), count) for bound, count in zip(RECOVERY_BUCKETS, counts)],
                              ("+Inf", len(seconds))], sum_value=sum(seconds))
    return histogram


def _effects(now: datetime) -> Iterator[Metric]:
    ledger = effect_metrics(now=now)
    effects = GaugeMetricFamily("deuz_effects", "Effects in the ledger, by status.", labels=["status"])
    for status, count in ledger["effects_by_status"].items():
        effects.add_metric([status], count)
    yield effects
    yield CounterMetricFamily("deuz_effect_cross_run_replays", "Times a run reached a business operation another "
                              "run had performed and got its recorded result.", value=ledger["cross_run_replays"])
    yield CounterMetricFamily("deuz_effect_duplicates", "Effects performed more than once (the ledger's promise "
                              "is 0).", value=ledger["duplicate_effects"])
    yield GaugeMetricFamily("deuz_unknown_outcome_oldest_age_seconds", "The age of the oldest effect whose outcome "
                            "is unknown or needs review; 0 when there is none.",
                            value=ledger["oldest_unknown_outcome_seconds"] or 0.0)


def _approvals(now: datetime) -> Iterator[Metric]:
    pending = ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING, expires_at__gt=now).aggregate(
        count=Count("id"), since=Min("issued_at"))
    yield GaugeMetricFamily("deuz_approvals_pending", "Approval requests waiting for a verdict.",
                            value=pending["count"])
    yield GaugeMetricFamily("deuz_approval_pending_oldest_age_seconds", "How long the oldest undecided request has "
                            "waited; 0 when none waits.", value=_age(pending["since"], now))


def _outbox() -> Iterator[Metric]:
    depth = GaugeMetricFamily("deuz_outbox_pending", "Outbox messages not yet delivered, by channel.",
                              labels=["channel"])
    counts = dict(OutboxMessage.objects.filter(status=OutboxMessage.Status.PENDING)
                  .values_list("channel").annotate(count=Count("id")).order_by())
    for channel in OutboxMessage.Channel.values:
        depth.add_metric([channel], counts.get(channel, 0))
    yield depth


def _tallies() -> Iterator[Metric]:
    """What the journals told (observability.tallies): calls by outcome, and the steps' durations."""
    tallies = list(Tally.objects.values_list("kind", "label", "outcome", "count", "total"))
    model_calls = CounterMetricFamily("deuz_model_calls", "Model calls, by the provider of the run's agent and "
                                      "outcome (ok, error, interrupted: its leg died or stopped first).",
                                      labels=["provider", "outcome"])
    tool_calls = CounterMetricFamily("deuz_tool_calls", "Tool calls, by tool and outcome (ok; error: the tool "
                                     "failed or refused its input; denied: a reviewer said no).",
                                     labels=["tool", "outcome"])
    buckets: dict[str, tuple[int, float]] = {}
    for kind, label, outcome, count, total in tallies:
        if kind == Tally.Kind.MODEL_CALL:
            model_calls.add_metric([label, outcome], count)
        elif kind == Tally.Kind.TOOL_CALL:
            tool_calls.add_metric([label, outcome], count)
        else:
            buckets[label] = (count, total)
    yield model_calls
    yield tool_calls
    steps = HistogramMetricFamily("deuz_step_duration_seconds", "From a top-level step's start to its finish "
                                  "(the model call and its tools), as journaled.")
    every, seconds = buckets.get("+Inf", (0, 0.0))
    steps.add_metric([], [*[(str(bound), buckets.get(str(bound), (0, 0.0))[0]) for bound in STEP_BUCKETS],
                          ("+Inf", every)], sum_value=seconds)
    yield steps


def durable_measures(now: datetime | None = None) -> Iterator[Metric]:
    """Every measure read from stored rows (module docstring)."""
    now = now or timezone.now()
    yield from _runs(now)
    yield from _usage()
    yield from _legs()
    yield from _effects(now)
    yield from _approvals(now)
    yield from _outbox()
    yield from _tallies()


def process_measures() -> Iterator[Metric]:
    """What lives in this process only."""
    yield GaugeMetricFamily("deuz_followers_open", "Streams (SSE and WebSocket) open in this process only; sum "
                            "over the processes for the whole.", value=open_followers())

