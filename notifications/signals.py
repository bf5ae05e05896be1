"""Domain events of notifications: new outbox messages, which wake this process's deliverers (the workers')."""

from __future__ import annotations

from django.dispatch import Signal

from runs.signals import send_on_commit

__all__ = ["outbox_messages_queued", "outbox_messages_queued_on_commit"]

#: Sent after the transaction that wrote outbox messages committed (no arguments).
outbox_messages_queued = Signal()


def outbox_messages_queued_on_commit() -> None:
    """Send outbox_messages_queued once the current transaction commits, so no deliverer looks for a message that
    may still roll back."""
    send_on_commit(outbox_messages_queued)
