"""Writes for notifications: webhook subscriptions, events into the outbox, the attempts that deliver them, and a
user's choice of emails.

An event is recorded in the transaction of the change it tells of (a receiver of the runs' and approvals'
signals sent inside it, notifications.publishing), with one message per recipient: a subscription's webhook, or
an email to a reviewer about a new approval request (due at once, or when the reviewer's digest window closes). A worker claims due messages
(``outbox_claim``: one attempt each, numbered, so two workers never make the same attempt), sends them, and
closes each attempt (``outbox_attempt_finish``): a 2xx answer delivers the message; anything else schedules the
next attempt after DEUZ_WEBHOOK_RETRY_BASE_SECONDS, twice as long after each failure, until an attempt fails
24 hours or more after the event, which fails the message.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from approvals.models import ApprovalRequest
from notifications.models import (
    DeliveryAttempt,
    EmailPreference,
    EventType,
    OutboxEvent,
    OutboxMessage,
    WebhookSubscription,
)
from notifications.selectors import webhook_subscription_get
from notifications.signals import outbox_messages_queued_on_commit
from notifications.standard_webhooks import webhook_message_id_new, webhook_secret_new
from runs.models import Run

__all__ = [
    "ATTEMPT_LEASE",
    "AttemptClaim",
    "RETRY_WINDOW",
    "email_preference_set",
    "outbox_attempt_finish",
    "outbox_claim",
    "outbox_claim_emails_of",
    "outbox_event_record",
    "outbox_message_skip",
    "outbox_retry_delay",
    "review_email_due_at",
    "webhook_subscription_create",
    "webhook_subscription_delete",
]

#: Retries go on until an attempt fails this long after the event (or later).
RETRY_WINDOW = timedelta(hours=24)
#: How long a claimed attempt is its worker's: longer than a delivery's 10-second timeout, so a live worker always
#: closes its attempt first; after it, a worker that died mid-attempt has its message taken up again.
ATTEMPT_LEASE = timedelta(seconds=60)
#: The error of an attempt whose worker stopped before it recorded an answer.
ATTEMPT_ABANDONED = "The worker making this attempt stopped before it recorded an answer."


@dataclass(frozen=True)
class AttemptClaim:
    """A worker's claim on one attempt of one message, with the message's channel and recipient (emails to one
    reviewer go out together)."""

    message_pk: int
    number: int
    channel: str = OutboxMessage.Channel.WEBHOOK
    recipient_pk: int | None = None


def _events_checked(events: Sequence[str]) -> list[str]:
    """The event types, each known, in the catalogue's order, without repeats."""
    if not isinstance(events, list | tuple) or not events:
        raise ValidationError({"events": ["Name at least one event type."]})
    unknown = sorted({str(name) for name in events} - set(EventType.values))
    if unknown:
        raise ValidationError({"events": [f"Unknown event type {name!r}." for name in unknown]})
    return [name for name in EventType.values if name in events]


@transaction.atomic
def webhook_subscription_create(*, owner: Any, url: str, events: Sequence[str], description: str = "") -> (
        WebhookSubscription):
    """A new subscription of ``owner`` to ``events`` at ``url``, with a new signing secret (its ``secret``,
    readable from the returned row: the creation's answer is the one place it is shown)."""
    subscription = WebhookSubscription(owner=owner, url=url, events=_events_checked(events), description=description)
    subscription.secret = webhook_secret_new()
    subscription.full_clean()
    subscription.save()
    return subscription


@transaction.atomic
def webhook_subscription_delete(*, owner: Any, subscription_id: int | str) -> None:
    """Delete ``owner``'s subscription with its undelivered messages and its delivery log."""
    webhook_subscription_get(owner=owner, subscription_id=subscription_id).delete()


@transaction.atomic
def outbox_event_record(
    *, event_type: str, run: Run | None, data: Callable[[], Any], subscriptions: Sequence[WebhookSubscription],
    reviewers: Sequence[Any] = (), approval: ApprovalRequest | None = None,
) -> OutboxEvent:
    """Record an event with one message per subscription, and one email per reviewer of ``reviewers`` about
    ``approval``, in the caller's transaction (a savepoint of it, so a failure here leaves the change itself intact);
    ``data`` renders the event's data inside it."""
    now = timezone.now()
    event = OutboxEvent(event_id=f"evt_{secrets.token_urlsafe(18)}", type=event_type, run=run, occurred_at=now)
    event.data = data()
    event.save()
    OutboxMessage.objects.bulk_create(
        OutboxMessage(
            event=event, channel=OutboxMessage.Channel.WEBHOOK, subscription=subscription,
            recipient_id=subscription.owner_id, webhook_id=webhook_message_id_new(), next_attempt_at=now,
            created_at=now,
        )
        for subscription in subscriptions
    )
    if reviewers and approval is not None:
        # A request recorded twice (it cannot be; the constraint says so anyway) still gets one email per reviewer.
        OutboxMessage.objects.bulk_create(
            [OutboxMessage(event=event, channel=OutboxMessage.Channel.EMAIL, approval=approval, recipient=reviewer,
                           webhook_id=webhook_message_id_new(), next_attempt_at=review_email_due_at(reviewer, now),
                           created_at=now)
             for reviewer in reviewers],
            ignore_conflicts=True,
        )
    outbox_messages_queued_on_commit()
    return event


def review_email_due_at(reviewer: Any, now: datetime) -> datetime:
    """When a new email to ``reviewer`` goes out: at once, or with DEUZ_REVIEW_EMAIL_DIGEST_SECONDS, when the
    reviewer's open window ends (the first request no email has told them of yet opens one), so one email tells
    them of every request of the window."""
    digest = settings.DEUZ_REVIEW_EMAIL_DIGEST_SECONDS
    if not digest:
        return now
    window = (OutboxMessage.objects.filter(channel=OutboxMessage.Channel.EMAIL, recipient_id=reviewer.pk,
                                           status=OutboxMessage.Status.PENDING, attempt_count=0,
                                           next_attempt_at__gt=now)
              .order_by("next_attempt_at").values_list("next_attempt_at", flat=True).first())
    return window or now + timedelta(seconds=digest)


@transaction.atomic
def email_preference_set(*, user: Any, review_requests: bool) -> EmailPreference:
    """Turn ``user``'s emails about approval requests on or off."""
    preference, _ = EmailPreference.objects.update_or_create(user=user, defaults={"review_requests": review_requests})
    return preference


@transaction.atomic
def outbox_claim(*, message_pks: Sequence[int], worker_id: str, now: datetime | None = None) -> list[AttemptClaim]:
    """Claim the next attempt of each message of ``message_pks`` that is still due: it is this worker's for
    ATTEMPT_LEASE. PostgreSQL skips rows another worker is claiming; SQLite serializes writers; and the
    compare-and-set on the attempt count keeps either correct."""
    now = now or timezone.now()
    due = OutboxMessage.objects.filter(pk__in=message_pks, status=OutboxMessage.Status.PENDING,
                                       next_attempt_at__lte=now)
    if connection.vendor == "postgresql":
        due = due.select_for_update(skip_locked=True)
    claims = []
    rows = due.order_by("next_attempt_at", "id").values_list("pk", "attempt_count", "channel", "recipient_id")
    for pk, count, channel, recipient_pk in rows:
        taken = OutboxMessage.objects.filter(pk=pk, attempt_count=count, status=OutboxMessage.Status.PENDING).update(
            attempt_count=count + 1, next_attempt_at=now + ATTEMPT_LEASE
        )
        if not taken:
            continue
        DeliveryAttempt.objects.filter(message_id=pk, finished_at__isnull=True).update(
            finished_at=now, error=ATTEMPT_ABANDONED
        )
        DeliveryAttempt.objects.create(message_id=pk, number=count + 1, worker_id=worker_id[:200], started_at=now)
        claims.append(AttemptClaim(message_pk=pk, number=count + 1, channel=channel, recipient_pk=recipient_pk))
    return claims


def outbox_claim_emails_of(*, recipient_pk: int, worker_id: str, now: datetime | None = None,
                           exclude: Sequence[int] = ()) -> list[AttemptClaim]:
    """Claim every other email to one reviewer that is due (a digest's window closed with more requests than one
    pass claims), so they go out in one email."""
    now = now or timezone.now()
    due = (OutboxMessage.objects.filter(channel=OutboxMessage.Channel.EMAIL, recipient_id=recipient_pk,
                                        status=OutboxMessage.Status.PENDING, next_attempt_at__lte=now)
           .exclude(pk__in=list(exclude)).values_list("pk", flat=True))
    return outbox_claim(message_pks=list(due), worker_id=worker_id, now=now)


def outbox_retry_delay(number: int) -> timedelta:
    """How long after failed attempt ``number`` the next one waits: the base, doubled after each failure."""
    return timedelta(seconds=settings.DEUZ_WEBHOOK_RETRY_BASE_SECONDS * 2 ** (number - 1))


def _claimed(claim: AttemptClaim) -> tuple[OutboxMessage, DeliveryAttempt] | None:
    """The message and attempt of ``claim``, locked, while the claim still holds (its lease did not lapse into
    another worker's attempt, and the message was not settled or deleted meanwhile)."""
    message = (OutboxMessage.objects.select_for_update()
               .filter(pk=claim.message_pk, attempt_count=claim.number, status=OutboxMessage.Status.PENDING).first())
    if message is None:
        return None
    return message, DeliveryAttempt.objects.get(message=message, number=claim.number)


@transaction.atomic
def outbox_attempt_finish(
    *, claim: AttemptClaim, status_code: int | None, error: str, duration_ms: int, now: datetime | None = None,
    delivered: bool | None = None,
) -> OutboxMessage | None:
    """Close the claimed attempt with the receiver's answer: a 2xx (or ``delivered``, for an email the mail server
    took) delivers the message; anything else schedules the next attempt, or fails the message once the retries
    ran RETRY_WINDOW. None when the claim lapsed."""
    claimed = _claimed(claim)
    if claimed is None:
        return None
    message, attempt = claimed
    now = now or timezone.now()
    if delivered is None:
        delivered = status_code is not None and 200 <= status_code < 300
    attempt.finished_at, attempt.duration_ms, attempt.status_code = now, max(duration_ms, 0), status_code
    attempt.error = "" if delivered else error[:2000]
    if delivered:
        message.status, message.next_attempt_at, message.finished_at = OutboxMessage.Status.DELIVERED, None, now
    elif now - message.created_at >= RETRY_WINDOW:
        message.status, message.next_attempt_at, message.finished_at = OutboxMessage.Status.FAILED, None, now
    else:
        message.next_attempt_at = attempt.next_attempt_at = now + outbox_retry_delay(claim.number)
    attempt.save()
    message.save(update_fields=["status", "next_attempt_at", "finished_at"])
    return message


@transaction.atomic
def outbox_message_skip(*, claim: AttemptClaim, reason: str, now: datetime | None = None) -> OutboxMessage | None:
    """Settle the claimed message without sending it (its recipient may no longer read the run): nothing is sent,
    now or later. None when the claim lapsed."""
    claimed = _claimed(claim)
    if claimed is None:
        return None
    message, attempt = claimed
    now = now or timezone.now()
    attempt.finished_at, attempt.duration_ms, attempt.error = now, 0, reason
    attempt.save()
    message.status, message.next_attempt_at, message.finished_at = OutboxMessage.Status.SKIPPED, None, now
    message.save(update_fields=["status", "next_attempt_at", "finished_at"])
    return message
