"""The effect ledger: a side-effecting tool runs at most once per operation, whatever crashes.

``effect_perform`` writes the intent before crossing the tool boundary; a committed operation replays
its receipt; an operation whose outcome is unknown (a crash or timeout after the call) is reconciled
with the outside system before anything is retried; a reused id with a different request is refused.
Every write is fenced by the run's owner epoch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from runs.errors import StaleOwnerError
from runs.models import Effect, Run
from runs.runtime.errors import RunHalted
from runs.runtime.faults import FaultPoint

__all__ = ["EffectConflict", "EffectFence", "effect_perform"]


class EffectConflict(Exception):
    """The operation id was used before for a different request."""


@dataclass(frozen=True)
class EffectFence:
    """Who may write effects for a run: the worker holding ``epoch``, with its crash probe."""

    run_id: str
    epoch: int
    fault: Callable[[str], None] = lambda point: None


def _fingerprint(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _owned_run(fence: EffectFence) -> Run:
    run = Run.objects.select_for_update().filter(run_id=fence.run_id, owner_epoch=fence.epoch).first()
    if run is None:
        raise StaleOwnerError(fence.run_id, fence.epoch)
    return run


def _update(fence: EffectFence, operation_id: str, **changes: Any) -> None:
    with transaction.atomic():
        _owned_run(fence)
        Effect.objects.filter(operation_id=operation_id).update(owner_epoch=fence.epoch, **changes)


def effect_perform(
    *,
    fence: EffectFence,
    operation_id: str,
    tool_call_id: str,
    tool_name: str,
    request: dict[str, Any],
    perform: Callable[[], dict[str, Any]],
    reconcile: Callable[[], dict[str, Any] | None],
    is_unknown_outcome: Callable[[BaseException], bool] = lambda exc: isinstance(exc, TimeoutError),
) -> dict[str, Any]:
    """Run ``perform`` at most once for ``operation_id`` and return its receipt.

    ``reconcile`` asks the outside system what it knows of the operation (None: it never happened). When an
    outcome cannot be established, the leg halts with RunHalted so a person reviews the run.
    """
    fingerprint = _fingerprint(request)
    with transaction.atomic():
        run = _owned_run(fence)
        effect, created = Effect.objects.select_for_update().get_or_create(
            operation_id=operation_id,
            defaults=dict(run=run, tool_call_id=tool_call_id, tool_name=tool_name, fingerprint=fingerprint,
                          request=request, owner_epoch=fence.epoch),
        )
        if effect.fingerprint != fingerprint:
            raise EffectConflict(f"Operation {operation_id} was recorded for a different request; refusing to reuse it.")
        if effect.status in (Effect.Status.COMMITTED, Effect.Status.RECONCILED):
            return effect.receipt  # replay: the operation happened already
        if effect.status == Effect.Status.FAILED:
            raise RuntimeError(effect.error or "The operation failed earlier.")
        needs_reconcile = not created  # an intent or unknown row: a previous attempt may have committed
    if needs_reconcile:
        receipt = _reconcile(fence, operation_id, reconcile)
        if receipt is not None:
            return receipt
    fence.fault(FaultPoint.BEFORE_EFFECT)
    _update(fence, operation_id, attempts=_attempts(operation_id) + 1)
    try:
        receipt = perform()
    except Exception as exc:
        if not is_unknown_outcome(exc):
            _update(fence, operation_id, status=Effect.Status.FAILED, error=str(exc)[:2000])
            raise
        _update(fence, operation_id, status=Effect.Status.UNKNOWN, error=f"{type(exc).__name__}: {exc}"[:2000])
        receipt = _reconcile(fence, operation_id, reconcile)
        if receipt is None:
            raise RunHalted(
                f"The outcome of {tool_name} operation {operation_id} is unknown and the provider has no record "
                "of it yet; a person must review the run before anything is retried."
            ) from exc
        return receipt
    fence.fault(FaultPoint.AFTER_EFFECT_COMMIT)
    _update(fence, operation_id, status=Effect.Status.COMMITTED, receipt=receipt, error="")
    fence.fault(FaultPoint.AFTER_EFFECT_RECORD)
    return receipt


def _attempts(operation_id: str) -> int:
    return Effect.objects.values_list("attempts", flat=True).get(operation_id=operation_id)


def _reconcile(
    fence: EffectFence, operation_id: str, reconcile: Callable[[], dict[str, Any] | None]
) -> dict[str, Any] | None:
    """Ask the outside system; a found record becomes the receipt, an unreachable system halts the run."""
    try:
        receipt = reconcile()
    except Exception as exc:
        _update(fence, operation_id, status=Effect.Status.UNKNOWN, error=f"Reconciliation failed: {exc}"[:2000])
        raise RunHalted(
            f"Operation {operation_id} may have happened and the provider cannot be asked; a person must review it."
        ) from exc
    if receipt is not None:
        _update(fence, operation_id, status=Effect.Status.RECONCILED, receipt=receipt, error="")
    return receipt
