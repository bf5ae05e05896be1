"""Writes for runs: starting, claiming, leasing, finishing, cancelling, resuming.

Every write on behalf of a worker names the owner epoch it holds and is accepted only while that epoch
is the run's (checked in the same statement as the write).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from runs.agents import agent_get
from runs.errors import RunAlreadyExists, RunNotFound, RunNotResumable, StaleOwnerError
from runs.ownership.fencing import OwnerFence, fence_run_pk_claimed
from runs.ownership.liveness import liveness_owners_dead
from runs.models import Leg, Run, Thread
from runs.ownership.wakeups import run_cancel_notify, runs_notify
from runs.agents.retries import RetryPlan
from runs.runtime.codec import encode_value
from runs.runtime.stores import SavedCheckpoint, is_sub_agent_key
from runs.runtime.types import AgentCheckpoint
from runs.runtime.usage import empty_usage, normalize_usage
from runs.signals import run_cancelled, run_journal_ended, run_leg_closed, run_status_changed_on_commit, send_on_commit
from runs.stores import get_store
from runs.stores.ledger import EFFECT_WAIT_FINISH, EFFECTS_STOPPED_FINISH, effect_is_settled, effects_stop_reason

__all__ = [
    "Claim",
    "run_cancel",
    "run_cancel_requested",
    "run_cancel_state",
    "run_cancelled_part",
    "run_checkpoint_mirror",
    "run_checkpoint_mirror_changes",
    "run_claim",
    "run_lease_renew",
    "run_leg_finish",
    "run_queue_after_verdicts",
    "run_requeue",
    "run_start",
]

logger = logging.getLogger("deuz.worker")

@dataclass(frozen=True)
class Claim:
    """A worker's ownership of a run for one leg."""

    run_id: str
    epoch: int
    leg: int
    kind: str
    cancel_requested: bool = False


def _lease_until():
    return timezone.now() + timedelta(seconds=settings.DEUZ_LEASE_SECONDS)


@transaction.atomic
def run_start(
    *, agent: str, messages: list[dict[str, Any]], run_id: str | None = None, user: AbstractBaseUser | None = None,
    metadata: dict[str, Any] | None = None, thread: Thread | None = None, turn: int | None = None,
    forked_from: Run | None = None, forked_from_step: int | None = None,
) -> Run:
    """Queue a new run of ``agent`` on ``messages``; ``run_id`` is minted when not given; ``metadata`` is the
    client's own JSON object, kept as given; ``thread`` and ``turn`` make it a turn of a thread (through
    runs.services.threads, which computes its messages); ``forked_from`` and ``forked_from_step`` a fork of a
    run's checkpoint (through runs.services.fork)."""
    agent_get(agent)  # raises UnknownAgent
    run = Run(
        run_id=run_id or f"run_{timezone.now():%Y%m%d}_{_token()}",
        agent=agent,
        status=Run.Status.QUEUED,
        created_by=user if user is not None and user.is_authenticated else None,
        input_messages=json.dumps(encode_value(messages), ensure_ascii=False),
        metadata=metadata or {},
        thread=thread,
        turn=turn,
        forked_from=forked_from,
        forked_from_step=forked_from_step,
    )
    run.full_clean(validate_unique=False)
    try:
        with transaction.atomic():
            run.save()
    except IntegrityError:
        if not Run.objects.filter(run_id=run.run_id).exists():
            raise  # another constraint: a thread's turn taken by a concurrent post
        raise RunAlreadyExists(run.run_id) from None
    transaction.on_commit(runs_notify)
    run_status_changed_on_commit(run_pk=run.pk)
    return run


def _token() -> str:
    import secrets

    return secrets.token_hex(6)


def run_claim(
    *, worker_id: str, limit: int = 1, run_id: str | None = None, take_over_dead: bool = False
) -> list[Claim]:
    """Take up to ``limit`` runs that need a leg: queued ones (a scheduled retry once its ``retry_at`` has come),
    running ones whose lease lapsed, and with ``take_over_dead`` running ones whose owner's liveness token is
    free (its process died: runs.ownership.liveness), never the claimer's own; the owners found alive are
    watched, so their death wakes this process's ``liveness_on_death`` callbacks.

    A claim increments the owner epoch, so the previous owner's writes are rejected from now on.
    PostgreSQL skips rows another worker is claiming; SQLite serializes writers, and the epoch
    compare-and-set keeps either correct.
    """
    now = timezone.now()
    is_due = Q(retry_at__isnull=True) | Q(retry_at__lte=now)
    claimable = (Q(status=Run.Status.QUEUED, cancel_requested=False) & is_due) | Q(
        status=Run.Status.RUNNING, lease_expires_at__lt=now
    )
    dead = _owners_dead(worker_id, now, run_id) if take_over_dead else set()
    if dead:
        # The owner's id is read with the run (and changes with every claim): a run another claimer took over
        # since the look, under a live id, is not matched.
        claimable |= Q(status=Run.Status.RUNNING, worker_id__in=dead)
    claims = []
    with transaction.atomic():
        candidates = Run.objects.filter(claimable).order_by("updated_at", "id")
        if run_id is not None:  # a follower continuing one dead run, exactly as a worker would
            candidates = candidates.filter(run_id=run_id)
        if connection.vendor == "postgresql":
            candidates = candidates.select_for_update(skip_locked=True)
        fields = ("id", "run_id", "status", "owner_epoch", "cancel_requested", "step_index", "retry_attempt",
                  "worker_id")
        for run in candidates.only(*fields)[:limit]:
            epoch = run.owner_epoch + 1
            taken = Run.objects.filter(pk=run.pk, owner_epoch=run.owner_epoch).update(
                owner_epoch=epoch,
                status=Run.Status.RUNNING,
                worker_id=worker_id,
                lease_expires_at=_lease_until(),
                updated_at=now,
            )
            if not taken:
                continue
            if run.worker_id in dead:
                logger.info("Run %s: its owner %s is gone; %s takes it over (epoch %d).", run.run_id, run.worker_id,
                            worker_id, epoch)
            number = Leg.objects.filter(run_id=run.pk).count() + 1
            kind = _leg_kind(run, earlier_legs=number - 1)
            Leg.objects.create(run_id=run.pk, number=number, kind=kind, owner_epoch=epoch, worker_id=worker_id)
            claims.append(Claim(run.run_id, epoch, number, kind, run.cancel_requested))
            fence_run_pk_claimed(run.run_id, epoch, run.pk)  # the leg's fences need not look it up
            run_status_changed_on_commit(run_pk=run.pk)
    return claims


def _owners_dead(worker_id: str, now: Any, run_id: str | None) -> set[str]:
    """The owners of running runs (leases not lapsed, owners other than ``worker_id``) whose process is gone."""
    running = Run.objects.filter(status=Run.Status.RUNNING, lease_expires_at__gte=now).exclude(
        worker_id__in=("", worker_id))
    if run_id is not None:
        running = running.filter(run_id=run_id)
    owners = set(running.values_list("worker_id", flat=True).distinct())
    # Watched: this process hears of their deaths at once (runs.ownership.liveness.liveness_on_death).
    return liveness_owners_dead(owners, watch=True) if owners else set()


def _leg_kind(run: Run, earlier_legs: int) -> str:
    """The kind of the leg a claim of ``run`` (as it was read, before the claim) starts, after ``earlier_legs``."""
    if run.status == Run.Status.RUNNING:
        return Leg.Kind.RECOVERY  # its owner died (its liveness token is free) or hung (its lease lapsed)
    if run.retry_attempt > 0:
        return Leg.Kind.RETRY  # the last leg's model call failed transiently and scheduled this one
    if run.step_index >= 0 or earlier_legs:
        return Leg.Kind.VERDICT
    return Leg.Kind.START


def run_lease_renew(*, run_id: str, epoch: int) -> bool:
    """Extend the lease; False when the epoch is no longer the run's (the caller must abandon the run).
    Returns True while owned; cancellation is read separately with run_cancel_requested."""
    try:
        OwnerFence(run_id, epoch).hold(lease_expires_at=_lease_until())
    except StaleOwnerError:
        return False
    return True


def run_cancel_requested(*, run_id: str) -> bool:
    return Run.objects.filter(run_id=run_id, cancel_requested=True).exists()


def run_cancel_state(*, run_id: str) -> dict[str, Any] | None:
    """The run's cancel as its ``cancelled`` part says it (``{"by", "reason"}``), or None while it has none: what a
    running leg reads at each of its cancel checks (one indexed read)."""
    row = (Run.objects.filter(run_id=run_id, cancel_requested=True)
           .values("cancelled_by__username", "cancel_reason").first())
    if row is None:
        return None
    return {"by": row["cancelled_by__username"], "reason": row["cancel_reason"]}


def run_cancelled_part(run: Run) -> dict[str, Any]:
    """The stream's ``cancelled`` part of ``run``: who cancelled it (a username, or None for the system) and why."""
    return {"type": "cancelled", "by": run.cancelled_by.get_username() if run.cancelled_by else None,
            "reason": run.cancel_reason}


def _journal_cancelled(run: Run, *, epoch: int | None = None) -> None:
    """End the run's journal with its ``cancelled`` part and a ``cancelled`` finish, then a sentinel, in the
    caller's transaction (a cancel no running leg will tell: a queued or suspended run, or a leg that ended
    otherwise), so a follower reads why the run ended and gets its [DONE]. ``epoch`` fences the write to the
    leg closing the run; without it the caller holds the run's row lock."""
    parts = [run_cancelled_part(run), {"type": "finish", "finish_reason": "cancelled", "usage": empty_usage()}]
    store = get_store("streams")
    if epoch is not None:
        store = store.fenced(run.run_id, epoch)
    last = store.append(run.run_id, parts, end_leg=True)
    send_on_commit(run_journal_ended, sender=Run, run_id=run.run_id, seq=last)


def run_checkpoint_mirror(saved: SavedCheckpoint) -> None:
    """The run row mirrors its latest root checkpoint's step and cumulative usage (a leg's save hook, inside the
    fenced save). Its status stays: the run becomes suspended when the leg closes, after the journal has every
    part of the leg, so a follower that sees "suspended" finds the approval requests. A checkpoint is a step that
    succeeded, so the count of retries in a row starts again."""
    changes = run_checkpoint_mirror_changes(saved.checkpoint)
    if changes:
        Run.objects.filter(pk=saved.revision.run_id).update(**changes)


def run_checkpoint_mirror_changes(checkpoint: AgentCheckpoint) -> dict[str, Any]:
    """The run fields a checkpoint mirrors (none for a sub-agent's); a store that folds them into its fence's
    UPDATE (DatabaseSessionStore's ``run_changes``) saves the mirror a statement of its own."""
    if is_sub_agent_key(checkpoint["run_id"]):
        return {}
    return {"step_index": checkpoint["step_index"], "usage": dict(checkpoint["usage"]), "retry_attempt": 0,
            "retry_at": None}


@transaction.atomic
def run_leg_finish(
    *,
    run_id: str,
    epoch: int,
    leg: int,
    finish_reason: str,
    usage: dict[str, Any],
    error: str = "",
    is_suspension_settled: Callable[[Run], bool] = lambda run: False,
    retry: RetryPlan | None = None,
    waits_for_operation: str = "",
) -> Run:
    """Close a leg and release the lease. A suspended run keeps waiting unless ``is_suspension_settled`` (asked
    with the run's row locked) says every verdict came in while the leg was closing; a leg that ends with
    ``finish_reason="retry"`` queues the run again for ``retry`` (its retry_at, attempt and limit); one that ends
    ``effect-wait`` (or needs review) on another run's business operation, ``waits_for_operation``, waits for it
    unless it settled meanwhile; the others end completed, cancelled, failed or needs_review."""
    if (finish_reason == "retry") != (retry is not None):
        raise ValueError("A retry plan goes with finish_reason 'retry', and only with it.")
    OwnerFence(run_id, epoch).hold()
    run = Run.objects.get(run_id=run_id)
    Leg.objects.filter(run=run, number=leg).update(  # the three counters always, also for a leg with no model call
        ended_at=timezone.now(), finish_reason=finish_reason, usage=normalize_usage(usage), error=error
    )
    run.lease_expires_at = None
    run.worker_id = ""
    run.finish_reason = finish_reason
    run.error = error
    run.waits_for_operation = waits_for_operation
    if finish_reason == "cancelled":  # the runtime stopped the leg for the cancel and streamed its part
        run.status = Run.Status.CANCELLED
    elif finish_reason == "suspended":
        if run.cancel_requested:
            run.status = Run.Status.CANCELLED
        elif is_suspension_settled(run):
            run.status = Run.Status.QUEUED  # every verdict came in while the leg was closing
        else:
            run.status = Run.Status.SUSPENDED
    elif finish_reason == "aborted":
        run.status = Run.Status.CANCELLED if run.cancel_requested else Run.Status.QUEUED
    elif finish_reason == "retry":
        run.status = Run.Status.CANCELLED if run.cancel_requested else Run.Status.QUEUED
        run.retry_at, run.retry_attempt, run.retry_limit = retry.retry_at, retry.attempt, retry.limit
    elif finish_reason == EFFECTS_STOPPED_FINISH:  # waits for the stop switch; released meanwhile, it goes on
        stopped = effects_stop_reason(agent=run.agent)
        run.status = Run.Status.CANCELLED if run.cancel_requested else (
            Run.Status.SUSPENDED if stopped else Run.Status.QUEUED)
    elif finish_reason == EFFECT_WAIT_FINISH:  # settled while the leg was closing: it goes on at once
        run.status = Run.Status.CANCELLED if run.cancel_requested else (
            Run.Status.QUEUED if effect_is_settled(waits_for_operation) else Run.Status.SUSPENDED)
    elif finish_reason == "error":
        run.status = Run.Status.FAILED
        run.retry_at = None
    elif finish_reason == "needs_review":
        run.status = Run.Status.NEEDS_REVIEW
    else:  # stop, stop-condition, max-steps
        run.status = Run.Status.COMPLETED
    if run.status == Run.Status.QUEUED:
        run.waits_for_operation = ""
    if run.status == Run.Status.CANCELLED and finish_reason != "cancelled":
        # The leg ended otherwise (at its suspension, on a model error...) while the cancel was on its way.
        run.finish_reason = "cancelled"
        _journal_cancelled(run, epoch=epoch)
    run.save(update_fields=["lease_expires_at", "worker_id", "finish_reason", "error", "status", "retry_at",
                            "retry_attempt", "retry_limit", "waits_for_operation", "updated_at"])
    run_leg_closed.send(sender=Run, run=run)
    if run.status == Run.Status.QUEUED:
        transaction.on_commit(runs_notify)
    run_status_changed_on_commit(run_pk=run.pk)
    return run


def run_queue_after_verdicts(*, run_pk: int) -> bool:
    """Queue a suspended run for its resume leg (its verdicts are all in); False when it is not suspended any
    more (cancelled, or its leg is still closing, which then queues it itself)."""
    queued = Run.objects.filter(pk=run_pk, status=Run.Status.SUSPENDED, cancel_requested=False).update(
        status=Run.Status.QUEUED, updated_at=timezone.now()
    )
    if queued:
        transaction.on_commit(runs_notify)
        run_status_changed_on_commit(run_pk=run_pk)
    return bool(queued)


@transaction.atomic
def run_cancel(*, run_id: str, user: AbstractBaseUser | None = None, reason: str = "") -> Run:
    """Stop the run: no new model call, no new effect. A running leg hears of it at once (runs.ownership.wakeups)
    and stops between two deltas or steps, streaming the ``cancelled`` part; any other run is cancelled here, its
    journal ended the same way. Who (None for the system), why and when are recorded; ``run_cancelled`` tells the
    layers above in the same transaction. A ``reason`` longer than the field allows is a ValidationError."""
    run = _run_locked(run_id)
    if run.is_terminal:
        raise RunNotResumable(f"The run is {run.get_status_display().lower()}; there is nothing to cancel.")
    run.cancel_reason = Run._meta.get_field("cancel_reason").clean(reason or "", run)
    run.cancel_requested = True
    run.cancelled_by = user if user is not None and user.is_authenticated else None
    run.cancelled_at = timezone.now()
    if run.status != Run.Status.RUNNING:
        run.status = Run.Status.CANCELLED
        run.finish_reason = "cancelled"
        _journal_cancelled(run)
    else:
        transaction.on_commit(partial(run_cancel_notify, run.run_id))
    run.save(update_fields=["cancel_requested", "cancelled_by", "cancelled_at", "cancel_reason", "status",
                            "finish_reason", "updated_at"])
    run_cancelled.send(sender=Run, run=run, user=run.cancelled_by)
    run_status_changed_on_commit(run_pk=run.pk)
    return run


@transaction.atomic
def run_requeue(*, run_id: str) -> Run:
    """Queue another leg for a run that failed or needs review (an operator's `runs resume`), with the model
    retries counted afresh."""
    run = _run_locked(run_id)
    if run.status not in {Run.Status.FAILED, Run.Status.NEEDS_REVIEW}:
        raise RunNotResumable(
            f"Only failed runs and runs that need review can be resumed by hand; this one is {run.status}."
        )
    if run.thread_id is not None and Run.objects.filter(thread_id=run.thread_id, turn__gt=run.turn).exists():
        # The next turn started from this one's history as it stood: going on now would fork the conversation.
        raise RunNotResumable("A later turn of its thread has started; this turn can no longer be resumed.")
    run.status = Run.Status.QUEUED
    run.error = ""
    run.retry_at, run.retry_attempt = None, 0
    run.save(update_fields=["status", "error", "retry_at", "retry_attempt", "updated_at"])
    transaction.on_commit(runs_notify)
    run_status_changed_on_commit(run_pk=run.pk)
    return run


def _run_locked(run_id: str) -> Run:
    try:
        return Run.objects.select_for_update().get(run_id=run_id)
    except Run.DoesNotExist:
        raise RunNotFound(run_id) from None

