"""System checks of what operators configure for observability."""

from __future__ import annotations

from django.core.checks import Error, register


@register()
def check_tracing(app_configs=None, **kwargs):
    """observability.E001: the OTEL_* variables name an exporter and a protocol this service has (each names its
    variable); a typo would otherwise export nothing without a word."""
    from observability.tracing import tracing_configuration_problems

    return [Error(problem, id="observability.E001") for problem in tracing_configuration_problems()]
