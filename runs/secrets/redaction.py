"""The service's secret values, in one place: what no error part, log line or page may carry."""

from __future__ import annotations

import os

from django.conf import settings

__all__ = ["service_secrets"]


def service_secrets() -> tuple[str, ...]:
    """Literal secret values to redact (extra model headers included: gateways take their credentials there)."""
    values = [settings.DEUZ_APPROVAL_SECRET, settings.SECRET_KEY, *settings.DEUZ_ENCRYPTION_KEYS,
              getattr(settings, "DEUZ_METRICS_TOKEN", None)]
    values += [os.environ.get(name, "") for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")]
    values += list((getattr(settings, "DEUZ_MODEL_EXTRA_HEADERS", None) or {}).values())
    return tuple(value for value in values if value)
