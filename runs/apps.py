from django.apps import AppConfig


class RunsConfig(AppConfig):
    """Agent runs: their records, the API to start and follow them, the workers."""

    name = "runs"
    verbose_name = "Runs"
