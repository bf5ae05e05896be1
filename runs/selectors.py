"""Reads for runs: one run, lists, legs, effects and their transitions, the stop switches, checkpoint history.
Plain reads only; what people are shown (states, timelines, receipts) is composed in runs.presenters."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.db.models import Max, Q, QuerySet
from django.db.models.fields.json import KeyTransform

from runs.errors import CheckpointNotFound, RunNotFound, SealedDataError, ThreadNotFound
from runs.models import Checkpoint, Effect, EffectStopSwitch, EffectTransition, JournalEntry, Leg, Run, Thread
from runs.runtime.codec import decode_value
from runs.runtime.types import AgentCheckpoint, Message
from runs.stores import get_store
from runs.stores.sessions import checkpoint_from_row

__all__ = [
    "effect_transition_list",
    "effects_stop_list",
    "messages_with_open_calls_settled",
    "run_checkpoint_at",
    "run_checkpoint_list",
    "run_checkpoint_rows",
    "run_effect_list",
    "run_effect_rows",
    "run_fork_list",
    "run_get",
    "run_input_messages",
    "run_journal_count",
    "run_latest_checkpoint",
    "run_latest_checkpoint_row",
    "run_latest_messages",
    "run_leg_list",
    "run_leg_signs_of_life",
    "run_list",
    "run_sub_agent_messages",
    "thread_get",
    "thread_history",
    "thread_latest_turn",
    "thread_list",
    "thread_messages",
    "thread_turn_list",
]


def run_get(*, run_id: str) -> Run:
    try:
        return Run.objects.select_related("created_by", "cancelled_by", "thread", "forked_from").get(run_id=run_id)
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


def run_checkpoint_at(*, run: Run, step_index: int) -> AgentCheckpoint:
    """The run's own (not a sub-agent's) latest checkpoint of step ``step_index``, full history included: where a
    step ended (its tool results in) or where it waits. CheckpointNotFound when the run has none of that step."""
    row = (Checkpoint.objects.filter(run=run, session_key=run.run_id, step_index=step_index)
           .order_by("-id").first())
    if row is None:
        raise CheckpointNotFound(run.run_id, step_index)
    return checkpoint_from_row(row)


def run_fork_list(*, run: Run) -> QuerySet[Run]:
    """The runs forked from ``run``, oldest first."""
    return run.forks.order_by("created_at", "id")


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


def run_sub_agent_messages(*, run: Run) -> dict[str, list[dict[str, Any]]]:
    """The latest history of each of the run's sub-agent calls, by session key (runs.runtime.subagents.child_run_id);
    a call whose checkpoint is sealed with a key this process lacks is left out."""
    newest: dict[str, Checkpoint] = {}
    for row in Checkpoint.objects.filter(run=run, session_key__startswith=f"{run.run_id}::").order_by("id"):
        newest[row.session_key] = row
    found: dict[str, list[dict[str, Any]]] = {}
    for key, row in newest.items():
        try:
            found[key] = checkpoint_from_row(row)["messages"]
        except SealedDataError:
            continue
    return found


def run_leg_list(*, run: Run) -> QuerySet[Leg]:
    """The run's legs as of ``run``: a leg a worker claimed after ``run`` was read (its owner epoch is newer) is
    left out, so a run read as queued is never told with a leg that seems to have died (the answer of a start or a
    fork that a worker claimed at once)."""
    return run.legs.filter(owner_epoch__lte=run.owner_epoch).order_by("number")


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


# --------------------------------------------------------------------------- threads


def thread_get(*, thread_id: str) -> Thread:
    try:
        return Thread.objects.select_related("created_by").get(thread_id=thread_id)
    except Thread.DoesNotExist:
        raise ThreadNotFound(thread_id) from None


def thread_list() -> QuerySet[Thread]:
    """Threads, latest activity (their last turn added) first."""
    return Thread.objects.select_related("created_by").order_by("-updated_at", "-id")


def thread_turn_list(*, thread: Thread) -> QuerySet[Run]:
    """The thread's turns, first first."""
    return thread.turns.order_by("turn")


def thread_latest_turn(*, thread: Thread) -> Run | None:
    return thread.turns.order_by("-turn").first()


def thread_messages(*, thread: Thread) -> list[Message]:
    """The conversation so far: its latest turn's latest messages (none before its first turn)."""
    latest = thread_latest_turn(thread=thread)
    return [] if latest is None else run_latest_messages(run=latest)


def thread_history(*, thread: Thread) -> list[Message]:
    """What the thread's next turn starts from: its latest turn's latest messages (its last checkpoint's, or the
    messages it started from when it has none), with every tool call no result answers settled as an ``is_error``
    result, so that a provider is never sent an unanswered call (a turn cancelled or failed mid-step leaves some)."""
    latest = thread_latest_turn(thread=thread)
    if latest is None:
        return []
    return _open_calls_settled(run_latest_messages(run=latest), status=latest.status)


def messages_with_open_calls_settled(messages: list[Message], *, output: str) -> list[Message]:
    """``messages`` with an ``is_error`` tool result saying ``output`` for each call no tool message answers (a fork
    starts from a checkpoint that may wait on some): a provider is never sent an unanswered call."""
    return _open_calls_settled(messages, status="", output=output)


def _open_calls_settled(messages: list[Message], *, status: str, output: str | None = None) -> list[Message]:
    """``messages`` with an ``is_error`` tool result for each call that no tool message right after its assistant
    message answers."""
    output = output or f"No result: the turn was {status} before this call was answered."
    answered = {
        part.get("tool_call_id")
        for message in messages if message["role"] == "tool" and isinstance(message["content"], list)
        for part in message["content"] if part.get("type") == "tool_result"
    }
    settled: list[Message] = []
    unanswered: list[dict[str, Any]] = []  # results owed by the assistant message just passed
    for message in messages:
        if unanswered:
            if message["role"] == "tool" and isinstance(message["content"], list):
                message = {**message, "content": [*message["content"], *unanswered]}
            else:
                settled.append({"role": "tool", "content": unanswered})
            unanswered = []
        settled.append(message)
        if message["role"] == "assistant" and not isinstance(message["content"], str):
            unanswered = [{
                "type": "tool_result", "tool_call_id": part["tool_call_id"], "tool_name": part["tool_name"],
                "output": output, "is_error": True,
            } for part in message["content"]
                if part.get("type") == "tool_call" and part.get("tool_call_id") not in answered]
    if unanswered:
        settled.append({"role": "tool", "content": unanswered})
    return settled
