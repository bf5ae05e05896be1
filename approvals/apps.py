from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    """Approval requests for gated tool calls and the reviewers' console."""

    name = "approvals"
    verbose_name = "Approvals"
