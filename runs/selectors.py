"""Reads for runs: one run, lists, legs, effects and their transitions, the stop switches, checkpoint history.
Plain reads only; what people are shown (states, timelines, receipts) is composed in runs.presenters."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.db.models import Max, Q, QuerySet
from django.db.models.fields.json import KeyTransform

from runs.errors import RunNotFound
from runs.models import Checkpoint, Effect, EffectStopSwitch, EffectTransition, JournalEntry, Leg, Run
from runs.runtime.codec import decode_value
from runs.runtime.types import AgentCheckpoint
from runs.stores import get_store

__all__ = [
    "effect_transition_list",
    "effects_stop_list",
    "run_checkpoint_list",
    "run_checkpoint_rows",
    "run_effect_list",
    "run_effect_rows",
    "run_get",
    "run_input_messages",
    "run_journal_count",
    "run_latest_checkpoint",
    "run_latest_checkpoint_row",
    "run_latest_messages",
    "run_leg_list",
    "run_leg_signs_of_life",
    "run_list",
]


def run_get(*, run_id: str) -> Run:
    try:
        return Run.objects.select_related("created_by", "cancelled_by").get(run_id=run_id)
    except Run.DoesNotExist:
        raise RunNotFound(run_id) from None


def run_list(
    *, status: str | None = None, agent: str | None = None, created_by: str | None = None,
    metadata: dict[str, str] | None = None,
) -> QuerySet[Run]:
    """Runs, newest first, optionally filtered (``created_by`` is a username; ``metadata`` keeps the runs whose
    metadata has each key at its top level with that string value)."""
    runs = Run.objects.order_by("-created_at", "-id")
    for number, (key, value) in enumerate((metadata or {}).items()):
        # A key transform rather than metadata__KEY: a key holding "__" would be read as a path. The comparison is
        # of JSON values on both databases, so "5" matches the string "5" and not the number 5.
        alias = f"metadata_{number}"
        runs = runs.alias(**{alias: KeyTransform(key, "metadata")}).filter(**{alias: value})
    if status:
        runs = runs.filter(status=status)
    if agent:
        runs = runs.filter(agent=agent)
    if created_by:
        runs = runs.filter(created_by__username=created_by)
    return runs


def run_input_messages(run: Run) -> list[dict[str, Any]]:
    return decode_value(json.loads(run.input_messages))


def run_checkpoint_list(*, run: Run, include_sub_agents: bool = False) -> list[AgentCheckpoint]:
    """Every stored checkpoint of the run, oldest first, as AgentCheckpoint dicts (time travel)."""
    return get_store("sessions").checkpoint_list(run.run_id, include_sub_agents=include_sub_agents)


def run_checkpoint_rows(*, run: Run) -> QuerySet[Checkpoint]:
    """The stored checkpoint records of the run and its sub-agents, oldest first (technical records)."""
    return Checkpoint.objects.filter(run=run).order_by("id")


def run_latest_checkpoint_row(*, run: Run) -> Checkpoint | None:
    """The record of the run's latest root checkpoint (not a sub-agent's)."""
    return Checkpoint.objects.filter(run=run, session_key=run.run_id).order_by("-id").first()


def run_latest_checkpoint(*, run: Run) -> AgentCheckpoint | None:
    """The run's latest root checkpoint, full history included."""
    return get_store("sessions").load(run.run_id)


def run_latest_messages(*, run: Run) -> list[dict[str, Any]]:
    """The run's latest full history, or the messages it started from before any checkpoint."""
    checkpoint = run_latest_checkpoint(run=run)
    return checkpoint["messages"] if checkpoint is not None else run_input_messages(run)


def run_leg_list(*, run: Run) -> QuerySet[Leg]:
    return run.legs.order_by("number")


def run_effect_rows(*, run: Run) -> QuerySet[Effect]:
    return run.effects.order_by("id")


def run_effect_list(*, run: Run) -> list[dict[str, Any]]:
    """The run's side effects from the effect ledger, oldest first."""
    return [
        {
            "operation_id": effect.operation_id,
            "tool_call_id": effect.tool_call_id,
            "tool_name": effect.tool_name,
            "status": effect.status,
            "receipt": effect.receipt,
        }
        for effect in run_effect_rows(run=run)
    ]


def run_journal_count(*, run: Run) -> int:
    """How many parts the run's journal holds."""
    return run.journal.filter(is_sentinel=False).count()


def run_leg_signs_of_life(*, run: Run, epochs: list[int]) -> dict[int, tuple[datetime, int | None]]:
    """For each owner epoch of ``epochs`` that wrote anything, when it last wrote a journal part or a checkpoint,
    and the last step of the run (not of a sub-agent) it checkpointed (None if none)."""
    if not epochs:
        return {}
    seen: dict[int, tuple[datetime, int | None]] = {}
    parts = (JournalEntry.objects.filter(run=run, owner_epoch__in=epochs).values("owner_epoch")
             .annotate(at=Max("created_at")).order_by())
    for row in parts:
        seen[row["owner_epoch"]] = (row["at"], None)
    checkpoints = (Checkpoint.objects.filter(run=run, owner_epoch__in=epochs).values("owner_epoch")
                   .annotate(at=Max("recorded_at"), step=Max("step_index", filter=Q(session_key=run.run_id)))
                   .order_by())
    for row in checkpoints:
        at = row["at"]
        if row["owner_epoch"] in seen:
            at = max(at, seen[row["owner_epoch"]][0])
        seen[row["owner_epoch"]] = (at, row["step"])
    return seen


def effect_transition_list(*, effect: Effect) -> list[EffectTransition]:
    """The effect's transitions, oldest first: its evidence for people."""
    return list(effect.transitions.select_related("user").order_by("id"))


def effects_stop_list() -> QuerySet[EffectStopSwitch]:
    """The stop switches that are on: the global one first (its agent is blank)."""
    return EffectStopSwitch.objects.filter(is_on=True).select_related("changed_by").order_by("agent")
