from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    """What operators see of Deuz with the tools they already run: Prometheus metrics (``GET /metrics``),
    OpenTelemetry traces and structured logs."""

    name = "observability"
    verbose_name = "Observability"

    def ready(self) -> None:
        from observability import checks  # noqa: F401  (registers the system checks)
        from observability.tallies import fold_before_prune
        from runs.signals import run_journals_pruning

        run_journals_pruning.connect(fold_before_prune, dispatch_uid="observability.fold_before_prune")
