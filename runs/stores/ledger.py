"""The effect ledger in the database, and people resolving what the system cannot know.

``DatabaseEffectLedger`` is the runtime's EffectLedger (runs.runtime.effects, where the rules are) on the ORM:
every write is fenced by the run's owner epoch (runs.ownership.fencing.OwnerFence) in its own transaction, and each move
is an EffectTransition with its time, owner epoch and the worker that made it.

``effect_resolve`` is the people's side: an effect that needs review is retried with the same operation id,
marked committed with a receipt, or abandoned (the run continues with an ``is_error`` result saying so); each
resolution is recorded with who, when and why, needs ``runs.resolve_effect``, and queues the run again once no
effect of it needs review.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from runs.access import effect_is_resolvable_by
from runs.errors import EffectNotFound, EffectNotResolvable, RunNotFound
from runs.ownership.fencing import OwnerFence
from runs.models import Effect, EffectTransition, Run
from runs.ownership.wakeups import runs_notify
from runs.runtime.effects import effect_transition_is_allowed
from runs.runtime.exceptions import EffectStateChanged
from runs.services.stop_switch import effects_stop_reason

__all__ = [
    "RESOLVE_ACTIONS",
    "DatabaseEffectLedger",
    "effect_entry",
    "effect_get",
    "effect_resolve",
    "effect_transition_list",
    "effects_needing_review",
]

#: What a person may do with an effect that needs review.
RESOLVE_ACTIONS = ("retry", "commit", "abandon")

_OUTCOMES = {Effect.Status.COMMITTED, Effect.Status.VERIFIED, Effect.Status.FAILED}
_UNKNOWN = {Effect.Status.UNKNOWN, Effect.Status.NEEDS_REVIEW}


def _json(value: Any) -> Any:
    """``value`` as plain JSON (a tool's output may hold values JSON has no type for)."""
    return None if value is None else json.loads(json.dumps(value, default=str))


def effect_entry(effect: Effect, *, run_id: str | None = None) -> dict[str, Any]:
    """An Effect row as the runtime's EffectEntry."""
    return {
        "operation_id": effect.operation_id,
        "run_id": run_id,
        "tool_call_id": effect.tool_call_id,
        "tool_name": effect.tool_name,
        "fingerprint": effect.fingerprint,
        "input": effect.request,
        "status": effect.status,
        "output": effect.receipt,
        "error": effect.error,
        "attempts": effect.attempts,
        "epoch": effect.owner_epoch,
        "approval": effect.approval,
        "outcome_source": effect.outcome_source,
    }


def _dispatch(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the sync ORM directly, or hand back an awaitable when an event loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args, **kwargs)
    return sync_to_async(function)(*args, **kwargs)


def _apply(effect: Effect, status: str, *, epoch: int, changes: Mapping[str, Any]) -> None:
    for key, value in changes.items():
        if key == "output":
            effect.receipt = _json(value)
        elif key in {"error", "attempts", "outcome_source"}:
            setattr(effect, key, value)
        elif key == "approval":
            effect.approval = _json(value)
        else:
            raise ValueError(f"An effect has no {key!r} to change.")
    effect.status, effect.owner_epoch = status, epoch
    if status in _UNKNOWN and effect.unknown_since is None:
        effect.unknown_since = timezone.now()
    elif status in _OUTCOMES:
        effect.unknown_since = None


class DatabaseEffectLedger:
    """The effect ledger of one leg: the runs.Effect rows of ``run_id``, written only while ``epoch`` owns it."""

    def __init__(self, *, run_id: str, epoch: int, agent: str, worker_id: str = "") -> None:
        self.fence = OwnerFence(run_id, epoch)
        self.epoch = epoch
        self.agent = agent
        self.worker_id = worker_id or f"epoch {epoch}"

    def __repr__(self) -> str:
        return f"DatabaseEffectLedger({self.fence!r})"

    # The EffectLedger protocol: sync callers get results, async callers get awaitables.

    def get(self, operation_id: str) -> Any:
        return _dispatch(self.get_sync, operation_id)

    def open(self, entry: Mapping[str, Any]) -> Any:
        return _dispatch(self.open_sync, entry)

    def advance(self, operation_id: str, **options: Any) -> Any:
        return _dispatch(self.advance_sync, operation_id, **options)

    def stopped_reason(self, *, tool_name: str) -> Any:
        return _dispatch(effects_stop_reason, agent=self.agent)

    def get_sync(self, operation_id: str) -> dict[str, Any] | None:
        effect = Effect.objects.filter(operation_id=operation_id, run__run_id=self.fence.run_id).first()
        return effect_entry(effect, run_id=self.fence.run_id) if effect is not None else None

    def open_sync(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        with transaction.atomic():
            run_pk = self.fence.hold()
            effect, created = Effect.objects.select_for_update().get_or_create(
                operation_id=entry["operation_id"],
                defaults=dict(
                    run_id=run_pk, tool_call_id=entry["tool_call_id"], tool_name=entry["tool_name"],
                    fingerprint=entry["fingerprint"], request=_json(entry["input"]), status=Effect.Status.PROPOSED,
                    owner_epoch=self.epoch,
                ),
            )
            if created:
                self._record(effect, "", Effect.Status.PROPOSED, via="tool", note="Proposed.", evidence=None)
        return effect_entry(effect, run_id=entry.get("run_id"))

    def advance_sync(
        self,
        operation_id: str,
        *,
        expected: str,
        status: str,
        via: str,
        note: str = "",
        evidence: Any = None,
        changes: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        with transaction.atomic():
            self.fence.hold()
            effect = Effect.objects.select_for_update().get(operation_id=operation_id)
            if effect.status != expected:
                raise EffectStateChanged(f"Operation {operation_id} is {effect.status}, not {expected}.")
            if not effect_transition_is_allowed(expected, status):
                raise ValueError(f"An effect cannot go from {expected} to {status}.")
            _apply(effect, status, epoch=self.epoch, changes=changes or {})
            effect.save()
            self._record(effect, expected, status, via=via, note=note, evidence=evidence)
        return effect_entry(effect, run_id=self.fence.run_id)

    def _record(self, effect: Effect, old: str, new: str, *, via: str, note: str, evidence: Any) -> None:
        EffectTransition.objects.create(
            effect=effect, from_status=old, to_status=new, owner_epoch=self.epoch,
            actor_kind=EffectTransition.Actor.WORKER, actor=self.worker_id, via=via, note=note[:2000],
            evidence=_json(evidence),
        )


# ---------------------------------------------------------------------------- reads


def effect_get(*, run_id: str, operation_id: str) -> Effect:
    try:
        return Effect.objects.select_related("run").get(run__run_id=run_id, operation_id=operation_id)
    except Effect.DoesNotExist:
        if not Run.objects.filter(run_id=run_id).exists():
            raise RunNotFound(run_id) from None
        raise EffectNotFound(run_id, operation_id) from None


def effect_transition_list(*, effect: Effect) -> list[EffectTransition]:
    """The effect's transitions, oldest first: its evidence for people."""
    return list(effect.transitions.select_related("user").order_by("id"))


def effects_needing_review(*, run: Run) -> list[Effect]:
    return list(run.effects.filter(status=Effect.Status.NEEDS_REVIEW).order_by("id"))


# ---------------------------------------------------------------------------- people resolve


def _abandoned_message(effect: Effect, who: str, reason: str) -> str:
    return (
        f"{effect.tool_name} operation {effect.operation_id} was abandoned by {who}: {reason}. Its outcome was "
        "never established, and it will not be attempted again."
    )


@transaction.atomic
def effect_resolve(
    *, run_id: str, operation_id: str, action: str, reason: str, receipt: Any = None, user: Any
) -> Effect:
    """A person resolves an effect that needs review: ``retry`` (attempt again with the same operation id),
    ``commit`` (it happened: ``receipt`` is its outcome) or ``abandon`` (the run goes on with an ``is_error``
    result saying so). Recorded with who, when and why; the run is queued again once nothing of it needs review."""
    if not effect_is_resolvable_by(user=user):
        raise PermissionDenied("Resolving effects needs the reviewer permission (runs.resolve_effect).")
    errors: dict[str, list[str]] = {}
    if action not in RESOLVE_ACTIONS:
        errors["action"] = [f"The action is one of {', '.join(RESOLVE_ACTIONS)}."]
    if not isinstance(reason, str) or not reason.strip():
        errors["reason"] = ["Say why: the reason is kept with the resolution."]
    if action == "commit" and not isinstance(receipt, dict):
        errors["receipt"] = ["Marking an effect committed needs its receipt, a JSON object."]
    if errors:
        raise ValidationError(errors)
    try:
        run = Run.objects.select_for_update().get(run_id=run_id)
    except Run.DoesNotExist:
        raise RunNotFound(run_id) from None
    try:
        effect = Effect.objects.select_for_update().get(run=run, operation_id=operation_id)
    except Effect.DoesNotExist:
        raise EffectNotFound(run_id, operation_id) from None
    if effect.status != Effect.Status.NEEDS_REVIEW:
        raise EffectNotResolvable(f"This effect is {effect.get_status_display().lower()}; only an effect that "
                                  "needs review can be resolved.")
    if run.status in {Run.Status.QUEUED, Run.Status.RUNNING}:
        raise EffectNotResolvable(f"The run is {run.status}; resolve its effects once it stops for review.")
    who, reason = user.get_username(), reason.strip()
    old = effect.status
    if action == "retry":
        status, evidence = Effect.Status.APPROVED, None
        changes: dict[str, Any] = {"approval": {"by_person": who, "fingerprint": effect.fingerprint}}
    elif action == "commit":
        status, evidence = Effect.Status.COMMITTED, {"receipt": receipt}
        changes = {"output": receipt, "error": "", "outcome_source": Effect.Source.PERSON}
    else:
        status, evidence = Effect.Status.FAILED, None
        changes = {"error": _abandoned_message(effect, who, reason), "outcome_source": Effect.Source.PERSON}
    _apply(effect, status, epoch=run.owner_epoch, changes=changes)
    effect.full_clean()
    effect.save()
    EffectTransition.objects.create(
        effect=effect, from_status=old, to_status=status, owner_epoch=run.owner_epoch,
        actor_kind=EffectTransition.Actor.PERSON, actor=who, user=user, via=action, note=reason[:2000],
        evidence=_json(evidence),
    )
    still = run.effects.filter(status=Effect.Status.NEEDS_REVIEW).exists()
    if run.status == Run.Status.NEEDS_REVIEW and not still:
        run.status, run.error = Run.Status.QUEUED, ""
        run.save(update_fields=["status", "error", "updated_at"])
        transaction.on_commit(runs_notify)
    return effect
