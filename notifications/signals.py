"""Domain events of notifications: new outbox messages, which wake this process's deliverers (the workers')."""

from __future__ import annotations

from functools import partial

from django.db import transaction
from django.dispatch import Signal

__all__ = ["outbox_messages_queued", "outbox_messages_queued_on_commit"]

#: Sent after the transaction that wrote outbox messages committed (no arguments).
outbox_messages_queued = Signal()


def outbox_messages_queued_on_commit() -> None:
    """Send outbox_messages_queued once the current transaction commits, so no deliverer looks for a message that
    may still roll back."""
    transaction.on_commit(partial(outbox_messages_queued.send, sender=None))
