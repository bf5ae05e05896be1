"""Domain events of runs for the layers built on it (approvals, the live pages), which runs itself never imports."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import transaction
from django.dispatch import Signal

__all__ = [
    "effect_needs_review",
    "run_cancelled",
    "run_journal_ended",
    "run_journals_pruning",
    "run_leg_closed",
    "run_status_changed",
    "run_status_changed_on_commit",
    "send_on_commit",
]

#: Sent inside run_cancel's transaction with ``run`` and ``user`` (who cancelled, or None).
run_cancelled = Signal()

#: Sent once a service (not a leg's journal writer) ended a run's journal and its transaction committed, with
#: ``run_id`` and ``seq`` (the last part's): the wire wakes the run's followers, as a leg's end does.
run_journal_ended = Signal()

#: Sent inside run_leg_finish's transaction with ``run``, saved in the status the leg's end gave it (a receiver's
#: writes, such as notifications' outbox, commit or roll back with the change).
run_leg_closed = Signal()

#: Sent inside the prune's transaction just before the journals of the runs ``run_pks`` are deleted, so what is
#: counted from journals (observability's tallies) is counted before they go.
run_journals_pruning = Signal()

#: Sent inside the effect ledger's transaction that moved an effect to needs_review, with ``effect``.
effect_needs_review = Signal()

#: Sent after the transaction that changed a run's status committed, with ``run_pk`` (the live pages listen).
run_status_changed = Signal()


def send_on_commit(signal: Signal, *, sender: Any = None, **kwargs: Any) -> None:
    """Send ``signal`` once the current transaction commits (at once outside one), so listeners never see a change
    that was rolled back."""
    transaction.on_commit(partial(signal.send, sender=sender, **kwargs))


def run_status_changed_on_commit(*, run_pk: int) -> None:
    """Send run_status_changed for the run once the current transaction commits (send_on_commit)."""
    send_on_commit(run_status_changed, run_pk=run_pk)
