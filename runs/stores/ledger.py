"""DatabaseEffectLedger: the runtime's EffectLedger (runs.runtime.effect_ledger: its states and moves) on the ORM.

Every write of a fenced view is fenced by the run's owner epoch (runs.ownership.fencing.OwnerFence) in its own
transaction, and each move is an EffectTransition with its time, owner epoch and the worker that made it. The
ledger's one read of the outside of a run is the stop switch (``effects_stop_reason``): while a switch is on, no
new effect is attempted, and a leg that reaches one finishes ``effects-stopped`` (runs.services.stop_switch turns
switches on and off). People resolving an effect that needs review is runs.services.resolution.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from runs.models import Effect, EffectStopSwitch, EffectTransition, Run
from runs.ownership.fencing import OwnerFence
from runs.ownership.wakeups import runs_notify
from runs.runtime.effect_ledger import EFFECTS_STOPPED_REASON, effect_advance_check
from runs.runtime.exceptions import EffectStateChanged
from runs.signals import effect_needs_review
from runs.stores.dispatch import dispatch

__all__ = [
    "EFFECTS_STOPPED_FINISH",
    "EFFECT_WAIT_FINISH",
    "DatabaseEffectLedger",
    "effect_apply",
    "SETTLED",
    "effect_entry",
    "effect_is_settled",
    "effect_waiters_queue",
    "effects_stop_reason",
    "plain_json",
]

#: The finish reason of a leg that suspended because effects are stopped.
EFFECTS_STOPPED_FINISH = "effects-stopped"

#: The finish reason of a leg that reached a business operation another run is performing: the run waits for it.
EFFECT_WAIT_FINISH = "effect-wait"

_OUTCOMES = {Effect.Status.COMMITTED, Effect.Status.VERIFIED, Effect.Status.FAILED}
_UNKNOWN = {Effect.Status.UNKNOWN, Effect.Status.NEEDS_REVIEW}


def effects_stop_reason(*, agent: str) -> str | None:
    """Why ``agent``'s runs may not start a new effect now (a stop switch is on, for it or for every agent), or
    None."""
    if EffectStopSwitch.objects.filter(Q(agent="") | Q(agent=agent), is_on=True).exists():
        return EFFECTS_STOPPED_REASON
    return None


def plain_json(value: Any) -> Any:
    """``value`` as plain JSON (a tool's output may hold values JSON has no type for)."""
    return None if value is None else json.loads(json.dumps(value, default=str))


def effect_entry(effect: Effect, *, run_id: str) -> dict[str, Any]:
    """An Effect row as the runtime's EffectEntry; ``run_id`` is the run that opened it."""
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
        "settled_at": int(effect.updated_at.timestamp() * 1000) if effect.updated_at else None,
    }


#: Statuses after which nobody is working on an operation any more: the runs waiting on it may go on.
SETTLED = frozenset({Effect.Status.COMMITTED, Effect.Status.VERIFIED, Effect.Status.FAILED, Effect.Status.NEEDS_REVIEW})


def effect_waiters_queue(operation_id: str, *, opener_pk: int) -> int:
    """Queue the runs that wait on ``operation_id``, another run's business operation, now that it settled (they
    replay it, fail with it, or need review with it); in the caller's transaction. Returns how many."""
    waiting = Run.objects.filter(waits_for_operation=operation_id, cancel_requested=False,
                                 status__in=[Run.Status.SUSPENDED, Run.Status.NEEDS_REVIEW]).exclude(pk=opener_pk)
    queued = waiting.update(status=Run.Status.QUEUED, waits_for_operation="", error="", updated_at=timezone.now())
    if queued:
        transaction.on_commit(runs_notify)
    return queued


def effect_is_settled(operation_id: str) -> bool:
    """Whether the operation is settled (or gone), so a run that meant to wait on it need not; in the caller's
    transaction, with the entry's row locked: an opener settling it right now has queued its waiters before
    this run was one, so this read must wait for that commit rather than see the entry as it was."""
    status = (Effect.objects.select_for_update().filter(operation_id=operation_id)
              .values_list("status", flat=True).first())
    return status is None or status in SETTLED


def effect_apply(effect: Effect, status: str, *, epoch: int, changes: Mapping[str, Any]) -> None:
    for key, value in changes.items():
        if key == "output":
            effect.receipt = plain_json(value)
        elif key in {"error", "attempts", "outcome_source"}:
            setattr(effect, key, value)
        elif key == "approval":
            effect.approval = plain_json(value)
        else:
            raise ValueError(f"An effect has no {key!r} to change.")
    effect.status, effect.owner_epoch = status, epoch
    if status in _UNKNOWN and effect.unknown_since is None:
        effect.unknown_since = timezone.now()
    elif status in _OUTCOMES:
        effect.unknown_since = None


class DatabaseEffectLedger:
    """The effect ledger in the database (``DEUZ_STORES["effects"]``): the runs.Effect rows. ``fenced`` gives one
    leg's view, which writes only while its owner epoch owns the run; an unfenced ledger only reads."""

    def __init__(self, *, fence: OwnerFence | None = None, agent: str = "", worker_id: str = "") -> None:
        self.fence = fence
        self.agent = agent
        self.worker_id = worker_id or (f"epoch {fence.epoch}" if fence is not None else "")

    def fenced(self, run_id: str, epoch: int, *, agent: str = "", worker_id: str = "") -> DatabaseEffectLedger:
        """The ledger of the leg that owns ``run_id`` at ``epoch``, for ``agent`` (whose stop switch it obeys);
        ``worker_id`` is recorded on every transition it writes."""
        return type(self)(fence=OwnerFence(run_id, epoch), agent=agent, worker_id=worker_id)

    @property
    def epoch(self) -> int:
        return self.fence.epoch if self.fence is not None else 0

    def __repr__(self) -> str:
        return f"DatabaseEffectLedger({self.fence!r})"

    def _fence(self) -> OwnerFence:
        if self.fence is None:
            raise TypeError("An unfenced effect ledger only reads: write through ledger.fenced(run_id, epoch).")
        return self.fence

    # The EffectLedger protocol: sync callers get results, async callers get awaitables.

    def get(self, operation_id: str) -> Any:
        return dispatch(self.get_sync, operation_id)

    def open(self, entry: Mapping[str, Any]) -> Any:
        return dispatch(self.open_sync, entry)

    def advance(self, operation_id: str, **options: Any) -> Any:
        return dispatch(self.advance_sync, operation_id, **options)

    def stopped_reason(self, *, tool_name: str) -> Any:
        return dispatch(effects_stop_reason, agent=self.agent)

    def get_sync(self, operation_id: str) -> dict[str, Any] | None:
        effect = Effect.objects.filter(operation_id=operation_id).select_related("run").first()
        return effect_entry(effect, run_id=effect.run.run_id) if effect is not None else None

    def open_sync(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        with transaction.atomic():
            run_pk = self._fence().hold()
            effect, created = Effect.objects.select_for_update().get_or_create(
                operation_id=entry["operation_id"],
                defaults=dict(
                    run_id=run_pk, tool_call_id=entry["tool_call_id"], tool_name=entry["tool_name"],
                    fingerprint=entry["fingerprint"], request=plain_json(entry["input"]), status=Effect.Status.PROPOSED,
                    owner_epoch=self.epoch,
                ),
            )
            if created:
                self._record(effect, "", Effect.Status.PROPOSED, via="tool", note="Proposed.", evidence=None)
                opener = entry.get("run_id") or self._fence().run_id
            else:  # opened already, by this run or, for a business operation, another one (the database decided)
                opener = Run.objects.filter(pk=effect.run_id).values_list("run_id", flat=True).get()
        return effect_entry(effect, run_id=opener)

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
        fence = self._fence()
        moves = status != expected
        with transaction.atomic():
            run_pk = fence.hold()
            effect = Effect.objects.select_for_update().select_related("run").get(operation_id=operation_id)
            if not moves:  # an event (a replay, a conflict...) records itself at whatever state the entry is in
                expected = status = effect.status
            elif effect.run_id != run_pk:
                raise EffectStateChanged(f"Operation {operation_id} belongs to run {effect.run.run_id}: only the run "
                                         "that opened it attempts, reconciles or retries it.")
            effect_advance_check(operation_id, current=effect.status, expected=expected, status=status)
            if effect.run_id == run_pk:  # another run's events leave the entry as its opener wrote it
                effect_apply(effect, status, epoch=self.epoch, changes=changes or {})
                effect.save()
                if moves and status == Effect.Status.NEEDS_REVIEW:
                    effect_needs_review.send(sender=Effect, effect=effect)
                if moves and status in SETTLED:
                    effect_waiters_queue(operation_id, opener_pk=run_pk)
            self._record(effect, expected, status, via=via, note=note, evidence=evidence)
        return effect_entry(effect, run_id=effect.run.run_id)

    def _record(self, effect: Effect, old: str, new: str, *, via: str, note: str, evidence: Any) -> None:
        EffectTransition.objects.create(
            effect=effect, from_status=old, to_status=new, owner_epoch=self.epoch,
            actor_kind=EffectTransition.Actor.WORKER, actor=self.worker_id, via=via, note=note[:2000],
            evidence=plain_json(evidence),
        )
