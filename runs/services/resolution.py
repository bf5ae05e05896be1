"""People resolving what the system cannot know: an effect that needs review is retried with the same operation
id, marked committed with a receipt, or abandoned (the run continues with an ``is_error`` result saying so).

Each resolution is recorded as an EffectTransition with who, when and why, needs ``runs.resolve_effect``, and
queues the run again once no effect of it needs review.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from runs.access import effect_is_resolvable_by
from runs.errors import EffectNotFound, EffectNotResolvable, RunNotFound
from runs.models import Effect, EffectTransition, Run
from runs.ownership.wakeups import runs_notify
from runs.stores.ledger import effect_apply, effect_waiters_queue, plain_json

__all__ = ["RESOLVE_ACTIONS", "effect_resolve"]

#: What a person may do with an effect that needs review.
RESOLVE_ACTIONS = ("retry", "commit", "abandon")


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
    effect_apply(effect, status, epoch=run.owner_epoch, changes=changes)
    effect.full_clean()
    effect.save()
    EffectTransition.objects.create(
        effect=effect, from_status=old, to_status=status, owner_epoch=run.owner_epoch,
        actor_kind=EffectTransition.Actor.PERSON, actor=who, user=user, via=action, note=reason[:2000],
        evidence=plain_json(evidence),
    )
    effect_waiters_queue(effect.operation_id, opener_pk=run.pk)  # other runs that met this operation go on too
    still = run.effects.filter(status=Effect.Status.NEEDS_REVIEW).exists()
    if run.status == Run.Status.NEEDS_REVIEW and not still:
        run.status, run.error = Run.Status.QUEUED, ""
        run.save(update_fields=["status", "error", "updated_at"])
        transaction.on_commit(runs_notify)
    return effect
