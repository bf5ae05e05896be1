from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    """What operators see of Deuz with the tools they already run: Prometheus metrics (``GET /metrics``),
    OpenTelemetry traces and structured logs."""

    name = "observability"
    verbose_name = "Observability"

    def ready(self) -> None:
        from observability import checks  # noqa: F401  (registers the system checks)
