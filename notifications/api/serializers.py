"""Serializers of the webhooks API: what it reads (a new subscription) and what it answers (subscriptions, the
secret once, deliveries with their attempts). A subscription's secret is rendered only by
``WebhookSubscriptionCreatedSerializer``, the creation's answer."""

from __future__ import annotations

from rest_framework import serializers

from notifications.addresses import WEBHOOK_URL_VALIDATOR
from notifications.models import DeliveryAttempt, EventType, OutboxMessage, WebhookSubscription
from runs.api.messages import StrictCharField

__all__ = [
    "DeliveryAttemptSerializer",
    "WebhookDeliverySerializer",
    "WebhookSubscriptionCreateInputSerializer",
    "WebhookSubscriptionCreatedSerializer",
    "WebhookSubscriptionSerializer",
]

MAX_URL_CHARS = 2000
MAX_DESCRIPTION_CHARS = 500


def _event_types(**kwargs) -> serializers.ListField:
    return serializers.ListField(child=serializers.ChoiceField(choices=EventType.choices), **kwargs)


class WebhookSubscriptionCreateInputSerializer(serializers.Serializer):
    url = StrictCharField(
        max_length=MAX_URL_CHARS, trim_whitespace=False, validators=[WEBHOOK_URL_VALIDATOR],
        help_text="Where to POST the events: an http:// or https:// URL with a host name or address, no user name "
        "or password and no #fragment. Where it leads is checked at each delivery: with DEBUG on only loopback "
        "addresses are delivered to; with it off, public addresses (private ones too with "
        "DEUZ_WEBHOOK_ALLOW_PRIVATE=1).",
    )
    events = _event_types(
        min_length=1, max_length=len(EventType.values),
        help_text="The event types to receive (a repeated one counts once).",
    )
    description = StrictCharField(
        required=False, allow_blank=True, default="", max_length=MAX_DESCRIPTION_CHARS, trim_whitespace=False,
        help_text="Yours to say what it is for.",
    )


class WebhookSubscriptionSerializer(serializers.ModelSerializer):
    """A subscription as lists show it: never its secret."""

    events = _event_types(help_text="The event types it receives.")

    class Meta:
        model = WebhookSubscription
        fields = ["id", "url", "events", "description", "created_at"]
        read_only_fields = fields


class WebhookSubscriptionCreatedSerializer(WebhookSubscriptionSerializer):
    """A new subscription with its signing secret, shown in this answer only."""

    secret = serializers.CharField(
        help_text="The Standard Webhooks signing secret (whsec_...): verify each delivery with it, e.g. "
        "standardwebhooks.Webhook(secret).verify(body, headers). It is shown only here."
    )

    class Meta(WebhookSubscriptionSerializer.Meta):
        fields = [*WebhookSubscriptionSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class DeliveryAttemptSerializer(serializers.ModelSerializer):
    """One attempt: when, how long, the receiver's status or the error, and the retry it scheduled."""

    class Meta:
        model = DeliveryAttempt
        fields = ["number", "started_at", "finished_at", "duration_ms", "status_code", "error", "next_attempt_at"]
        read_only_fields = fields
        extra_kwargs = {"next_attempt_at": {"help_text": "The retry this attempt scheduled (null: none)."}}


class WebhookDeliverySerializer(serializers.ModelSerializer):
    """One event for the subscription: its webhook-id, where it stands, and every attempt (oldest first)."""

    event_id = serializers.CharField(source="event.event_id")
    type = serializers.ChoiceField(source="event.type", choices=EventType.choices)
    run_id = serializers.CharField(source="event.run.run_id", allow_null=True, help_text="The run it is about.")
    occurred_at = serializers.DateTimeField(source="event.occurred_at")
    attempts = DeliveryAttemptSerializer(many=True)

    class Meta:
        model = OutboxMessage
        fields = ["webhook_id", "event_id", "type", "run_id", "occurred_at", "status", "attempt_count",
                  "next_attempt_at", "finished_at", "attempts"]
        read_only_fields = fields
        extra_kwargs = {
            "webhook_id": {"help_text": "The webhook-id header of every attempt of this delivery."},
            "next_attempt_at": {"help_text": "When the next attempt is due (null once delivered, failed or skipped)."},
        }
