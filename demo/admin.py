"""The sandboxes' books in the admin, read-only: what the demo provider paid, the demo shell ran and the demo outbox
sent."""

from django.contrib import admin

from demo.models import SandboxCommand, SandboxMessage, SandboxPayment
from runs.admin import ReadOnlyAdmin


@admin.register(SandboxCommand)
class SandboxCommandAdmin(ReadOnlyAdmin):
    list_display = ["command", "operation_id", "exit_code", "created_at"]
    search_fields = ["command", "operation_id"]


@admin.register(SandboxPayment)
class SandboxPaymentAdmin(ReadOnlyAdmin):
    list_display = ["transaction_id", "operation_id", "fingerprint", "created_at"]
    search_fields = ["transaction_id", "operation_id"]
    date_hierarchy = "created_at"


@admin.register(SandboxMessage)
class SandboxMessageAdmin(ReadOnlyAdmin):
    list_display = ["message_id", "to", "operation_id", "created_at"]
    search_fields = ["message_id", "to", "operation_id"]
    date_hierarchy = "created_at"
