"""Reads for notifications: a user's webhook subscriptions and their deliveries, who an event goes to, and what
the outbox has due."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Prefetch, QuerySet

from notifications.errors import WebhookSubscriptionNotFound
from notifications.models import DeliveryAttempt, OutboxMessage, WebhookSubscription
from runs.access import run_is_readable_by
from runs.models import Run

__all__ = [
    "outbox_due_ids",
    "outbox_message_for_delivery",
    "outbox_recipient_may_read",
    "webhook_delivery_list",
    "webhook_subscription_get",
    "webhook_subscription_list",
    "webhook_subscriptions_for",
]

#: The largest id a subscription can have (a 64-bit primary key); a larger one in a URL is simply not found.
_MAX_ID = 2**63 - 1


def webhook_subscription_list(*, owner: Any) -> QuerySet[WebhookSubscription]:
    """``owner``'s subscriptions, newest first."""
    return WebhookSubscription.objects.filter(owner_id=owner.pk).order_by("-created_at", "-id")


def webhook_subscription_get(*, owner: Any, subscription_id: int | str) -> WebhookSubscription:
    """``owner``'s subscription ``subscription_id``; another user's is not found, exactly as a missing one."""
    text = str(subscription_id)
    if not text.isascii() or not text.isdigit() or not 0 < int(text) <= _MAX_ID:
        raise WebhookSubscriptionNotFound()
    try:
        return WebhookSubscription.objects.get(pk=int(text), owner_id=owner.pk)
    except WebhookSubscription.DoesNotExist:
        raise WebhookSubscriptionNotFound() from None


def webhook_delivery_list(*, subscription: WebhookSubscription) -> QuerySet[OutboxMessage]:
    """The subscription's messages, newest first, each with its event and its attempts (oldest first)."""
    return (
        OutboxMessage.objects.filter(subscription=subscription)
        .select_related("event__run")
        .prefetch_related(Prefetch("attempts", queryset=DeliveryAttempt.objects.order_by("number")))
        .order_by("-created_at", "-id")
    )


def webhook_subscriptions_for(*, event_type: str, run: Run) -> list[WebhookSubscription]:
    """The subscriptions that want ``event_type`` and whose owner may read ``run``: who an event goes to."""
    subscriptions = WebhookSubscription.objects.select_related("owner").order_by("id")
    return [s for s in subscriptions if s.wants(event_type) and run_is_readable_by(run, user=s.owner)]


def outbox_due_ids(*, now: datetime, limit: int) -> list[int]:
    """Up to ``limit`` pending messages whose next attempt is due at ``now``, the longest due first (a plain read:
    the claim locks them)."""
    due = OutboxMessage.objects.filter(status=OutboxMessage.Status.PENDING, next_attempt_at__lte=now)
    return list(due.order_by("next_attempt_at", "id").values_list("pk", flat=True)[:limit])


def outbox_message_for_delivery(*, message_pk: int) -> OutboxMessage | None:
    """The message with what an attempt needs: its event and run, its subscription, its recipient (fresh from the
    database, so a permission taken away since is gone)."""
    return (
        OutboxMessage.objects.select_related("event__run", "subscription", "recipient")
        .filter(pk=message_pk)
        .first()
    )


def outbox_recipient_may_read(message: OutboxMessage) -> bool:
    """Whether the message's recipient may still read the event's run (an event about no run: whether they are an
    active user)."""
    run = message.event.run
    user = message.recipient
    if run is None:
        return user.is_active
    return run_is_readable_by(run, user=user)
