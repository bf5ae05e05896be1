from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    """What operators see of Deuz with the tools they already run: Prometheus metrics (``GET /metrics``)."""

    name = "observability"
    verbose_name = "Observability"
