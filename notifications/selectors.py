"""Reads for notifications: a user's webhook subscriptions and their deliveries, who an event goes to (a webhook's
subscribers, a request's reviewers), what the outbox has due, and a user's choice of emails."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Prefetch, Q, QuerySet

from approvals.models import ApprovalRequest
from approvals.roles import DECIDE_APPROVALS, approval_is_decidable_by, run_approvals_decided_by
from notifications.errors import WebhookSubscriptionNotFound
from notifications.models import DeliveryAttempt, EmailPreference, OutboxMessage, WebhookSubscription
from runs.access import run_is_readable_by
from runs.models import Run

__all__ = [
    "email_preference_get",
    "outbox_due_ids",
    "outbox_message_for_delivery",
    "outbox_messages_for_email",
    "outbox_recipient_may_read",
    "review_email_recipients",
    "review_email_wanted_by",
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


def email_preference_get(*, user: Any) -> EmailPreference:
    """``user``'s choice of emails (the default, unsaved, when they never made one)."""
    return EmailPreference.objects.filter(user_id=user.pk).first() or EmailPreference(user_id=user.pk)


def review_email_wanted_by(user: Any) -> bool:
    """Whether ``user`` can be emailed approval requests: active, with an address, and not turned off."""
    return bool(user.is_active and user.email) and email_preference_get(user=user).review_requests


def review_email_recipients(*, request: ApprovalRequest) -> list[Any]:
    """Who is emailed about the new ``request``: for an agent whose approvals reviewers decide, each user who may
    decide it (approvals.roles, the one home of that rule: four eyes leaves out the run's creator) and wants the
    email; nobody for an agent whose approvals its run's creator decides (a chat user answers their own)."""
    run = request.run
    if run_approvals_decided_by(run) != "reviewers":
        return []
    app_label, codename = DECIDE_APPROVALS.split(".")
    may_decide = (Q(groups__permissions__codename=codename, groups__permissions__content_type__app_label=app_label)
                  | Q(user_permissions__codename=codename, user_permissions__content_type__app_label=app_label)
                  | Q(is_superuser=True))
    candidates = (get_user_model().objects.filter(may_decide, is_active=True).exclude(email="")
                  .exclude(email_preference__review_requests=False).distinct().order_by("pk"))
    return [user for user in candidates if approval_is_decidable_by(user=user, run=run)]


def outbox_messages_for_email(*, message_pks: list[int]) -> dict[int, OutboxMessage]:
    """The email messages ``message_pks`` by pk, each with its request, run, the run's creator and its recipient
    (fresh from the database, so a permission taken away since is gone)."""
    rows = OutboxMessage.objects.select_related("approval__run__created_by", "recipient", "event__run").filter(
        pk__in=message_pks, channel=OutboxMessage.Channel.EMAIL)
    return {row.pk: row for row in rows}
