from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    """Approval requests for gated tool calls and the reviewers' console."""

    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from approvals.services import approval_requests_withdraw
        from runs.signals import run_cancelled

        run_cancelled.connect(approval_requests_withdraw, dispatch_uid="approvals.withdraw_on_cancel")
