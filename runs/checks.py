"""System checks for the runs settings (run by `manage.py check` and at start-up)."""

from __future__ import annotations

import inspect

from django.conf import settings
from django.core.checks import Error, register
from django.utils.module_loading import import_string


@register()
def check_agents(app_configs=None, **kwargs):
    """runs.E001: every DEUZ_AGENTS entry must name an importable factory that takes ``leg=``. It runs before
    `manage.py serve` and `worker` start (and in deuz_project.asgi), so a bad entry stops them, named."""
    errors = []
    for name, path in getattr(settings, "DEUZ_AGENTS", {}).items():
        problem = _factory_problem(path)
        if problem:
            errors.append(Error(f"DEUZ_AGENTS[{name!r}] = {path!r} {problem}", id="runs.E001",
                                hint="Fix the entry in the DEUZ_AGENTS environment variable, or remove it."))
    return errors


def _factory_problem(path: str) -> str | None:
    try:
        factory = import_string(path)
    except ImportError as exc:
        return f"cannot be imported: {exc}"
    except Exception as exc:  # the module itself failed while importing
        return f"cannot be imported: its module raised {type(exc).__name__}: {exc}"
    if not callable(factory):
        return "is not callable: it must be a factory returning an AgentDefinition."
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    accepts = any(parameter.kind is parameter.VAR_KEYWORD for parameter in signature.parameters.values())
    if not accepts and "leg" not in signature.parameters:
        return "does not take leg=: a factory is called as factory(leg=LegContext or None)."
    return None


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


@register()
def check_mcp_servers(app_configs=None, **kwargs):
    """runs.E004: every DEUZ_MCP_SERVERS entry is a command or a URL server (the message names the entry only)."""
    from runs.runtime.mcp import mcp_servers_problems

    return [Error(problem, id="runs.E004") for problem in mcp_servers_problems()]
