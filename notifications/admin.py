"""Admin for webhook subscriptions and the outbox, read-only: subscriptions change through the API, the outbox
through its deliveries. No page shows a subscription's secret or an event's data."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from notifications.models import DeliveryAttempt, EmailPreference, OutboxEvent, OutboxMessage, WebhookSubscription


class _ReadOnly:
    """No add or change for anyone; deleting is the model's delete permission (superusers)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class DeliveryAttemptInline(_ReadOnly, admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    fields = readonly_fields = ["number", "worker_id", "started_at", "duration_ms", "status_code", "error",
                                "next_attempt_at"]


class OutboxMessageInline(_ReadOnly, admin.TabularInline):
    model = OutboxMessage
    extra = 0
    can_delete = False
    show_change_link = True
    fk_name = "event"
    fields = readonly_fields = ["webhook_id", "channel", "subscription", "recipient", "status", "attempt_count",
                                "next_attempt_at"]


@admin.register(WebhookSubscription)
class WebhookSubscriptionAdmin(_ReadOnly, admin.ModelAdmin):
    list_display = ["id", "owner", "url", "event_list", "description", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["url", "description", "owner__username"]
    fields = readonly_fields = ["owner", "url", "events", "description", "created_at"]  # never the secret

    @admin.display(description="events")
    def event_list(self, subscription: WebhookSubscription) -> str:
        return ", ".join(subscription.events)


@admin.register(OutboxEvent)
class OutboxEventAdmin(_ReadOnly, admin.ModelAdmin):
    list_display = ["event_id", "type", "run", "occurred_at"]
    list_filter = ["type", "occurred_at"]
    search_fields = ["event_id", "run__run_id"]
    fields = readonly_fields = ["event_id", "type", "run", "occurred_at"]
    inlines = [OutboxMessageInline]


@admin.register(OutboxMessage)
class OutboxMessageAdmin(_ReadOnly, admin.ModelAdmin):
    list_display = ["webhook_id", "event_type", "run_id", "subscription", "status", "attempt_count",
                    "next_attempt_at", "created_at"]
    list_filter = ["status", "channel", "event__type", "created_at"]
    search_fields = ["webhook_id", "event__event_id", "event__run__run_id", "subscription__url",
                     "recipient__username"]
    list_select_related = ["event__run", "subscription"]
    fields = readonly_fields = ["webhook_id", "event", "channel", "subscription", "recipient", "approval", "status",
                                "attempt_count", "next_attempt_at", "created_at", "finished_at"]
    inlines = [DeliveryAttemptInline]

    @admin.display(description="event", ordering="event__type")
    def event_type(self, message: OutboxMessage) -> str:
        return message.event.type

    @admin.display(description="run")
    def run_id(self, message: OutboxMessage) -> str:
        return message.event.run.run_id if message.event.run else "-"


@admin.register(DeliveryAttempt)
class DeliveryAttemptAdmin(_ReadOnly, admin.ModelAdmin):
    list_display = ["message", "number", "started_at", "duration_ms", "status_code", "error", "next_attempt_at"]
    list_filter = ["status_code", "started_at"]
    search_fields = ["message__webhook_id", "error", "worker_id"]
    list_select_related = ["message"]
    fields = readonly_fields = ["message", "number", "worker_id", "started_at", "finished_at", "duration_ms",
                                "status_code", "error", "next_attempt_at"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(EmailPreference)
class EmailPreferenceAdmin(_ReadOnly, admin.ModelAdmin):
    """Who turned review emails off (each user sets their own on /account/)."""

    list_display = ["user", "review_requests", "updated_at"]
    list_filter = ["review_requests"]
    search_fields = ["user__username", "user__email"]
    fields = readonly_fields = ["user", "review_requests", "updated_at"]
