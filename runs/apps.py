from django.apps import AppConfig


class RunsConfig(AppConfig):
    """Agent runs: their records, the API to start and follow them, the workers."""

    name = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        from approvals.signals import approval_requests_changed
        from runs import checks  # noqa: F401  (registers the system checks)
        from runs.signals import run_journal_ended, run_status_changed
        from runs.wire.live import approvals_notify, run_status_notify, run_stream_wake

        run_status_changed.connect(run_status_notify, dispatch_uid="runs.wire.live.status")
        run_journal_ended.connect(run_stream_wake, dispatch_uid="runs.wire.live.stream")
        approval_requests_changed.connect(approvals_notify, dispatch_uid="runs.wire.live.approvals")
