"""The sandboxes' books in the admin, read-only: what the demo provider paid and the demo shell ran."""

from django.contrib import admin

from demo.models import SandboxCommand, SandboxPayment
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
