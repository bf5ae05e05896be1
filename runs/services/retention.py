"""Retention: a finished run's bulky records (journal, checkpoints, message chain) are removed after a while;
its recovery receipt is kept on the run, so what happened stays answerable (`runs export`, the run page).

Runs are pruned a batch at a time, each in its own transaction, so a long prune holds no lock for long and can
be stopped and started again. Legs, effects (the ledger) and approval requests (the audit trail) are kept. What
the receipt says is composed above runs (runs.presenters.receipt, from runs and approvals): the caller passes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from runs.models import Checkpoint, JournalEntry, Run, RunMessage
from runs.signals import run_journals_pruning

__all__ = ["PruneProgress", "runs_prunable", "runs_prune"]

FINISHED = (Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED)


@dataclass(frozen=True)
class PruneProgress:
    """Where a prune stands after a batch: runs done of the total, and the rows removed so far."""

    runs_done: int
    runs_total: int
    journal_parts: int
    checkpoints: int
    messages: int


def runs_prunable(*, older_than_days: int) -> QuerySet[Run]:
    """Finished runs not touched for ``older_than_days`` days and not pruned yet, oldest first."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    return Run.objects.filter(status__in=FINISHED, updated_at__lt=cutoff, pruned_at__isnull=True).order_by("id")


def _counts(run_pks: list[int]) -> tuple[int, int, int]:
    return (
        JournalEntry.objects.filter(run_id__in=run_pks, is_sentinel=False).count(),
        Checkpoint.objects.filter(run_id__in=run_pks).count(),
        RunMessage.objects.filter(run_id__in=run_pks).count(),
    )


def runs_prune(
    *, older_than_days: int, receipt: Callable[[Run], dict], dry_run: bool = False, batch_size: int = 100,
    on_progress: Callable[[PruneProgress], None] = lambda progress: None,
) -> PruneProgress:
    """Prune every prunable run, ``batch_size`` runs a transaction, reporting after each batch; each pruned run
    keeps ``receipt(run)`` (its recovery receipt as it stands). With ``dry_run`` nothing is removed and the
    counts are what would be."""
    if older_than_days < 0:
        raise ValueError("older_than_days must be 0 or more.")
    total = runs_prunable(older_than_days=older_than_days).count()
    done, parts, checkpoints, messages = 0, 0, 0, 0
    for batch in _batches(older_than_days, batch_size, dry_run=dry_run):
        counted = _counts(batch) if dry_run else _prune(batch, receipt)
        done += len(batch)
        parts, checkpoints, messages = parts + counted[0], checkpoints + counted[1], messages + counted[2]
        on_progress(PruneProgress(done, total, parts, checkpoints, messages))
    return PruneProgress(done, total, parts, checkpoints, messages)


def _batches(older_than_days: int, batch_size: int, *, dry_run: bool) -> Iterator[list[int]]:
    after = 0
    while True:
        batch = list(
            runs_prunable(older_than_days=older_than_days).filter(pk__gt=after).values_list("pk", flat=True)[:batch_size]
        )
        if not batch:
            return
        yield batch
        after = batch[-1]


@transaction.atomic
def _prune(run_pks: list[int], receipt: Callable[[Run], dict]) -> tuple[int, int, int]:
    now, pruned = timezone.now(), []
    locked = Run.objects.select_for_update(of=("self",)).select_related("created_by", "cancelled_by")
    for run in locked.filter(pk__in=run_pks):
        if run.status not in FINISHED or run.pruned_at is not None:
            continue  # it moved on (an operator resumed it) since the batch was read
        kept = json.dumps(receipt(run), ensure_ascii=False)
        Run.objects.filter(pk=run.pk).update(pruned_at=now, pruned_receipt=kept)
        pruned.append(run.pk)
    counts = _counts(pruned)
    run_journals_pruning.send(sender=Run, run_pks=pruned)
    JournalEntry.objects.filter(run_id__in=pruned).delete()
    # Checkpoints point into the message chain: both go; approval requests keep their rows (revision emptied).
    Checkpoint.objects.filter(run_id__in=pruned).delete()
    RunMessage.objects.filter(run_id__in=pruned).delete()
    return counts
