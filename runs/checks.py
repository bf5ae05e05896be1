"""System checks for the runs settings (run by `manage.py check` and at start-up)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register
from django.utils.module_loading import import_string


@register()
def check_agents(app_configs=None, **kwargs):
    """runs.E001: every DEUZ_AGENTS entry must name an importable factory."""
    errors = []
    for name, path in getattr(settings, "DEUZ_AGENTS", {}).items():
        try:
            factory = import_string(path)
        except ImportError as exc:
            errors.append(Error(f"DEUZ_AGENTS[{name!r}] = {path!r} cannot be imported: {exc}", id="runs.E001"))
            continue
        if not callable(factory):
            errors.append(Error(f"DEUZ_AGENTS[{name!r}] = {path!r} is not callable.", id="runs.E001"))
    return errors


@register()
def check_stores(app_configs=None, **kwargs):
    """runs.E002: every DEUZ_STORES entry must name an importable BACKEND."""
    errors = []
    stores = getattr(settings, "DEUZ_STORES", {})
    if "sessions" not in stores:
        errors.append(Error("DEUZ_STORES needs a 'sessions' entry.", id="runs.E002"))
    for alias, config in stores.items():
        try:
            import_string(config["BACKEND"])
        except (ImportError, KeyError, TypeError) as exc:
            errors.append(Error(f"DEUZ_STORES[{alias!r}] has no importable BACKEND: {exc}", id="runs.E002"))
    return errors
