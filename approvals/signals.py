"""Domain events of approvals for the layers built on it (the live pages), which approvals itself never imports."""

from __future__ import annotations

from django.dispatch import Signal

from runs.signals import send_on_commit

__all__ = ["approval_decided", "approval_requested", "approval_requests_changed", "approval_requests_changed_on_commit"]

#: Sent inside the transaction that recorded a suspension's new requests, with ``requests`` (the rows); a
#: receiver's writes (notifications' outbox) commit or roll back with them.
approval_requested = Signal()

#: Sent inside the transaction that decided a request (approved, denied, or expired undecided), with ``request``.
approval_decided = Signal()

#: Sent after the transaction that changed a run's approval requests (recorded, decided, expired, withdrawn,
#: used) committed, with ``run_pk``.
approval_requests_changed = Signal()


def approval_requests_changed_on_commit(*, run_pk: int) -> None:
    """Send approval_requests_changed for the run once the current transaction commits (runs.signals.send_on_commit)."""
    send_on_commit(approval_requests_changed, run_pk=run_pk)
