from django.apps import AppConfig


class RunsConfig(AppConfig):
    """Agent runs: their records, the API to start and follow them, the workers."""

    name = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        from runs import checks  # noqa: F401  (registers the system checks)
        from runs.wire.live import run_status_notify
        from runs.signals import run_status_changed

        run_status_changed.connect(run_status_notify, dispatch_uid="runs.wire.live.status")
