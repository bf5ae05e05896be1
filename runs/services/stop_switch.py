"""The stop switch: during an incident, no new effect is attempted, for every agent or for one.

While a switch is on, a run that reaches a new effect suspends with the reason "effects are stopped" (its leg
finishes ``effects-stopped``); reads, replays of recorded outcomes, reconciliation and suspension go on.
Released, the runs it suspended are queued again and continue where they stopped: nothing is lost. Who
stopped and released, and when, is kept on the switch.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from runs.agents import agent_get
from runs.models import EffectStopSwitch, Run
from runs.ownership.wakeups import runs_notify
from runs.stores.ledger import EFFECTS_STOPPED_FINISH

__all__ = ["effects_release", "effects_stop"]


def _user_or_none(user: Any) -> Any:
    return user if user is not None and getattr(user, "is_authenticated", False) else None


@transaction.atomic
def effects_stop(*, agent: str | None = None, reason: str = "", user: Any = None) -> EffectStopSwitch:
    """Stop new effects of ``agent`` (every agent when None); UnknownAgent for a name no agent has."""
    if agent:
        agent_get(agent)
    switch, _ = EffectStopSwitch.objects.select_for_update().get_or_create(
        agent=agent or "", defaults={"changed_at": timezone.now()}
    )
    switch.is_on, switch.reason = True, reason
    switch.changed_by, switch.changed_at = _user_or_none(user), timezone.now()
    switch.full_clean()
    switch.save()
    return switch


@transaction.atomic
def effects_release(*, agent: str | None = None, user: Any = None) -> int:
    """Release the switch of ``agent`` (the global one when None) and queue the runs it held that no other
    switch still holds; returns how many runs were queued."""
    EffectStopSwitch.objects.filter(agent=agent or "", is_on=True).update(
        is_on=False, changed_by=_user_or_none(user), changed_at=timezone.now()
    )
    still_stopped = set(EffectStopSwitch.objects.filter(is_on=True).values_list("agent", flat=True))
    if "" in still_stopped:
        return 0
    held = Run.objects.filter(
        status=Run.Status.SUSPENDED, finish_reason=EFFECTS_STOPPED_FINISH, cancel_requested=False
    ).exclude(agent__in=still_stopped)
    if agent:
        held = held.filter(agent=agent)
    queued = held.update(status=Run.Status.QUEUED, error="", updated_at=timezone.now())
    if queued:
        transaction.on_commit(runs_notify)
    return queued
