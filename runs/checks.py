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


#: Each alias the service uses, with the protocol methods its back end must have.
STORE_CONTRACTS = {
    "sessions": ("save", "load", "aload", "fenced", "checkpoint_list", "delete", "list"),
    "streams": ("append", "read", "fenced", "last_seq"),
    "effects": ("get", "open", "advance", "stopped_reason", "fenced"),
}


@register()
def check_stores(app_configs=None, **kwargs):
    """runs.E002: DEUZ_STORES has every alias, each naming an importable BACKEND with the full contract."""
    errors = []
    stores = getattr(settings, "DEUZ_STORES", {})
    for alias in STORE_CONTRACTS:
        if alias not in stores:
            errors.append(Error(f"DEUZ_STORES needs a {alias!r} entry.", id="runs.E002"))
    for alias, config in stores.items():
        try:
            backend = import_string(config["BACKEND"])
        except (ImportError, KeyError, TypeError) as exc:
            errors.append(Error(f"DEUZ_STORES[{alias!r}] has no importable BACKEND: {exc}", id="runs.E002"))
            continue
        missing = [name for name in STORE_CONTRACTS.get(alias, ()) if not callable(getattr(backend, name, None))]
        if missing:
            errors.append(Error(
                f"DEUZ_STORES[{alias!r}] BACKEND {config['BACKEND']} lacks {', '.join(missing)} of the store contract.",
                id="runs.E002",
            ))
    return errors


@register()
def check_fault(app_configs=None, **kwargs):
    """runs.E003: DEUZ_FAULT, when set, names a known fault point (a typo would never fire)."""
    from runs.execution.fault_probe import fault_spec_error

    error = fault_spec_error(getattr(settings, "DEUZ_FAULT", None))
    return [Error(error, id="runs.E003")] if error else []
