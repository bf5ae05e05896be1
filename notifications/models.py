"""Webhook subscriptions and the outbox: each event is written in the transaction of the change it tells of, with
one message per recipient, and every attempt to deliver a message is logged.

  WebhookSubscription   a user's URL, the event types it wants, its signing secret (sealed)
  OutboxEvent           one change (run.completed, approval.requested...) and its data, as the API shows it
  OutboxMessage         the event for one recipient on one channel: a subscription's webhook, or a reviewer's email
                        about an approval request; its id, status and when the next attempt is due
  DeliveryAttempt       one try at a message: when, how long, the answer or the error, and the retry it set
  EmailPreference       whether a user is emailed the approval requests they may decide (on unless turned off)
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from notifications.addresses import WEBHOOK_URL_VALIDATOR
from runs.secrets.sealing import seal_text, seal_value, unseal_text, unseal_value

__all__ = ["DeliveryAttempt", "EmailPreference", "EventType", "OutboxEvent", "OutboxMessage", "WebhookSubscription"]


class EventType(models.TextChoices):
    """What a subscription can ask to be told."""

    RUN_SUSPENDED = "run.suspended", "A run waits (for a reviewer, a stop switch or another run's operation)"
    RUN_COMPLETED = "run.completed", "A run completed"
    RUN_FAILED = "run.failed", "A run failed"
    RUN_CANCELLED = "run.cancelled", "A run was cancelled"
    RUN_NEEDS_REVIEW = "run.needs_review", "A run needs a person's review"
    APPROVAL_REQUESTED = "approval.requested", "A tool call waits for approval"
    APPROVAL_DECIDED = "approval.decided", "An approval request was approved, denied or expired"
    EFFECT_NEEDS_REVIEW = "effect.needs_review", "An effect's outcome is unknown and needs a person"


class WebhookSubscription(models.Model):
    """A user's webhook: the events of the runs its owner may read, POSTed to ``url`` and signed with its secret."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_subscriptions"
    )
    url = models.CharField(max_length=2000, validators=[WEBHOOK_URL_VALIDATOR])
    events = models.JSONField(default=list, help_text="The event types it receives.")
    description = models.CharField(max_length=500, blank=True)
    # The Standard Webhooks secret (whsec_...), sealed like checkpoints (DEUZ_ENCRYPTION_KEYS); read it as
    # ``secret``. It signs every delivery, so it is kept, never hashed; it is shown once, in the creation's answer.
    secret_sealed = models.TextField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.url} ({self.owner})"

    @property
    def secret(self) -> str:
        return unseal_text(self.secret_sealed)

    @secret.setter
    def secret(self, value: str) -> None:
        self.secret_sealed = seal_text(value)

    def wants(self, event_type: str) -> bool:
        return event_type in self.events


class OutboxEvent(models.Model):
    """One change people are told about, written in the change's own transaction."""

    event_id = models.CharField(max_length=40, unique=True)
    type = models.CharField(max_length=40, choices=EventType.choices, db_index=True)
    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="outbox_events",
        help_text="The run the event is about: each delivery checks that its recipient may still read it.",
    )
    # The event's data as codec JSON, sealed like checkpoints: it holds the run's input and tool inputs.
    data_sealed = models.BinaryField(editable=False)
    occurred_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-occurred_at", "-id"]

    def __str__(self) -> str:
        return f"{self.type} {self.event_id}"

    @property
    def data(self) -> object:
        return unseal_value(self.data_sealed)

    @data.setter
    def data(self, value: object) -> None:
        self.data_sealed = seal_value(value)


class OutboxMessage(models.Model):
    """An event for one recipient on one channel, delivered at least once: retried with growing delays until an
    attempt succeeds or the retries run out."""

    class Channel(models.TextChoices):
        WEBHOOK = "webhook", "Webhook"
        EMAIL = "email", "Email to a reviewer"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed (retries exhausted)"
        SKIPPED = "skipped", "Skipped (the recipient may not read the run, or the subscription is gone)"

    event = models.ForeignKey(OutboxEvent, on_delete=models.CASCADE, related_name="messages")
    channel = models.CharField(max_length=20, choices=Channel.choices, default=Channel.WEBHOOK)
    subscription = models.ForeignKey(
        WebhookSubscription, null=True, blank=True, on_delete=models.CASCADE, related_name="messages"
    )
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+",
        help_text="Who the message is for (a subscription's owner, a reviewer): each attempt checks they may still "
        "read the run.",
    )
    approval = models.ForeignKey(
        "approvals.ApprovalRequest", null=True, blank=True, on_delete=models.CASCADE, related_name="+",
        help_text="The request an email is about (emails only).",
    )
    webhook_id = models.CharField(
        max_length=40, unique=True,
        help_text="The webhook-id, the same on every attempt (an email's Message-ID is made from it).",
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    attempt_count = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When the next attempt is due (while one is being made, when it may be made again if its worker "
        "died); empty once the message is settled.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="outbox_message_due")]
        constraints = [
            models.CheckConstraint(
                condition=~Q(channel="webhook") | Q(subscription__isnull=False), name="outbox_webhook_has_subscription"
            ),
            models.CheckConstraint(
                condition=~Q(channel="email") | Q(approval__isnull=False), name="outbox_email_has_approval"
            ),
            # At most one email per request and reviewer, whatever records it twice.
            models.UniqueConstraint(
                fields=["approval", "recipient"], condition=Q(channel="email"), name="outbox_one_email_per_reviewer"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.webhook_id} ({self.status})"


class DeliveryAttempt(models.Model):
    """One try at delivering a message: opened when a worker claims it, closed with the answer."""

    message = models.ForeignKey(OutboxMessage, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    worker_id = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True, help_text="The receiver's HTTP status.")
    error = models.TextField(blank=True, help_text="Why the attempt failed (empty on a 2xx answer).")
    next_attempt_at = models.DateTimeField(null=True, blank=True, help_text="The retry this attempt scheduled.")

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["message", "number"], name="delivery_attempt_number_unique")]

    def __str__(self) -> str:
        return f"attempt {self.number} of message {self.message_id}"


class EmailPreference(models.Model):
    """A user's choice of emails; a user without a row gets them (the default is on)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="email_preference"
    )
    review_requests = models.BooleanField(
        default=True, help_text="Email me each approval request I may decide (set on /account/).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user}: review emails {'on' if self.review_requests else 'off'}"
