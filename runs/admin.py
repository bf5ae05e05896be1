"""Admin for runs and their records. Everything is read-only: runs change only through the services,
and the admin's actions call the same services as the API."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from runs.errors import RunNotFound, RunNotResumable, SealedDataError
from runs.models import Checkpoint, Effect, JournalEntry, Leg, Run, RunMessage, SandboxPayment
from runs.runtime.codec import encode_value
from runs.sealing import unseal
from runs.services import run_cancel, run_requeue
from runs.stores import get_store

TOKEN_PREVIEW_LENGTH = 12


def token_preview(token: str) -> str:
    """The start of a bearer token, enough to tell two apart, never enough to use one."""
    return f"{token[:TOKEN_PREVIEW_LENGTH]}…" if token else "-"


def _redact_tokens(value: Any) -> Any:
    """``value`` with every ``token`` entry (approval tokens in pending approvals) cut to a preview."""
    if isinstance(value, dict):
        return {
            key: token_preview(item) if key == "token" and isinstance(item, str) else _redact_tokens(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_redact_tokens(item) for item in value]
    return value


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shows records and changes none: no add, change or delete, for anyone."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class LegInline(ReadOnlyInline):
    model = Leg
    fields = readonly_fields = [
        "number", "kind", "owner_epoch", "worker_id", "started_at", "ended_at", "finish_reason", "error",
    ]


class EffectInline(ReadOnlyInline):
    model = Effect
    fields = readonly_fields = [
        "operation_id", "tool_name", "status", "attempts", "owner_epoch", "receipt", "updated_at",
    ]


def _total_tokens(usage: dict[str, Any] | None) -> int:
    return int((usage or {}).get("total_tokens", 0))


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = [
        "run_id", "agent", "status", "created_by", "step_index", "total_tokens", "owner_epoch", "worker_id",
        "created_at",
    ]
    list_filter = ["status", "agent", "cancel_requested"]
    search_fields = ["run_id", "created_by__username"]
    date_hierarchy = "created_at"
    list_select_related = ["created_by"]
    fields = [
        "run_id", "agent", "status", "step_index", "usage", "finish_reason", "error", "owner_epoch", "worker_id",
        "lease_expires_at", "cancel_requested", "cancelled_by", "cancelled_at", "retry_at", "retry_attempt",
        "retry_limit", "created_by", "created_at", "updated_at",
    ]
    inlines = [LegInline, EffectInline]
    actions = ["cancel_selected", "resume_selected"]

    @admin.display(description="total tokens")
    def total_tokens(self, run: Run) -> int:
        return _total_tokens(run.usage)

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Cancelling and resuming are changes to runs, made by the services on the operator's behalf."""
        return request.user.has_perm("runs.change_run")

    @admin.action(description="Cancel selected runs", permissions=["operate"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(request, queryset, run_cancel, "cancelled")

    @admin.action(description="Resume selected runs", permissions=["operate"])
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        self._each(request, queryset, run_requeue, "queued for another leg")

    def _each(self, request: HttpRequest, queryset: QuerySet[Run], service: Any, done: str) -> None:
        succeeded = 0
        for run_id in queryset.values_list("run_id", flat=True):
            try:
                service(run_id=run_id)
            except (RunNotFound, RunNotResumable) as exc:
                self.message_user(request, f"{run_id}: {exc}", messages.ERROR)
            else:
                succeeded += 1
        if succeeded:
            self.message_user(request, f"{succeeded} run(s) {done}.", messages.SUCCESS)


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ["session_key", "step_index", "status", "message_count", "owner_epoch", "recorded_at"]
    list_filter = ["status"]
    search_fields = ["session_key", "run__run_id"]
    list_select_related = ["run"]
    fields = [
        "run", "session_key", "step_index", "status", "usage", "agent_path", "message_count", "owner_epoch",
        "created_at_ms", "recorded_at", "decoded",
    ]

    @admin.display(description="checkpoint (decoded; approval tokens shortened)")
    def decoded(self, checkpoint: Checkpoint) -> str:
        try:
            value = get_store("sessions").checkpoint_from_row(checkpoint)
        except SealedDataError as exc:
            return format_html("<em>{}</em>", str(exc))
        text = json.dumps(_redact_tokens(encode_value(value)), ensure_ascii=False, indent=2)
        return format_html("<pre>{}</pre>", text)


@admin.register(JournalEntry)
class JournalEntryAdmin(ReadOnlyAdmin):
    list_display = ["run", "seq", "is_sentinel", "part_type", "owner_epoch", "created_at"]
    list_filter = ["is_sentinel"]
    search_fields = ["run__run_id"]
    list_select_related = ["run"]
    fields = ["run", "seq", "is_sentinel", "owner_epoch", "created_at", "part_shown"]

    @admin.display(description="type")
    def part_type(self, entry: JournalEntry) -> str:
        return "end of leg" if entry.is_sentinel else entry.decoded_part.get("type", "-")

    @admin.display(description="part (approval tokens shortened)")
    def part_shown(self, entry: JournalEntry) -> str:
        # Approval-request parts carry the bearer token.
        return format_html(
            "<pre>{}</pre>", json.dumps(_redact_tokens(entry.decoded_part), ensure_ascii=False, indent=2)
        )


@admin.register(Leg)
class LegAdmin(ReadOnlyAdmin):
    list_display = ["run", "number", "kind", "owner_epoch", "worker_id", "started_at", "ended_at", "finish_reason"]
    list_filter = ["kind", "finish_reason"]
    search_fields = ["run__run_id", "worker_id"]
    list_select_related = ["run"]


@admin.register(Effect)
class EffectAdmin(ReadOnlyAdmin):
    list_display = ["operation_id", "run", "tool_name", "status", "attempts", "owner_epoch", "updated_at"]
    list_filter = ["status", "tool_name"]
    search_fields = ["operation_id", "tool_call_id", "run__run_id"]
    list_select_related = ["run"]


@admin.register(RunMessage)
class RunMessageAdmin(ReadOnlyAdmin):
    list_display = ["session_key", "position", "run", "size"]
    search_fields = ["session_key", "run__run_id"]
    list_select_related = ["run"]
    # ``data`` holds sealed message bytes: only their decoded length is shown, never the bytes.
    fields = ["run", "session_key", "parent", "position", "size"]

    @admin.display(description="decoded size")
    def size(self, message: RunMessage) -> str:
        try:
            return f"{len(unseal(message.data))} bytes"
        except SealedDataError:
            return "sealed (no key opens it)"


@admin.register(SandboxPayment)
class SandboxPaymentAdmin(ReadOnlyAdmin):
    list_display = ["transaction_id", "operation_id", "fingerprint", "created_at"]
    search_fields = ["transaction_id", "operation_id"]
    date_hierarchy = "created_at"
