"""The agent registry: names runs can use, each a factory of model, tools and policy (settings.DEUZ_AGENTS).

Checkpoints store data, not code, so every leg rebuilds its agent from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from runs.errors import UnknownAgent
from runs.agents.retries import RetryPolicy, retry_policy_default

__all__ = ["AgentDefinition", "LegContext", "agent_build", "agent_get", "agent_names", "db_tool"]


@dataclass(frozen=True, kw_only=True)
class AgentDefinition:
    """What a leg needs to run an agent. With no ``approve_tool_call``, gated calls wait for reviewers; ``retry``
    says how transient model errors are retried (default: the DEUZ_MODEL_RETRY_* settings at build time)."""

    name: str
    model: Any
    tools: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 10
    system: str | None = None
    description: str = ""
    approve_tool_call: Callable[[dict[str, Any]], Any] | None = None
    retry: RetryPolicy = field(default_factory=retry_policy_default)


def db_tool(execute: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a sync tool (or an effect's reconcile or verify) that uses the ORM: the runtime runs it on a pool
    thread, so close that thread's connections afterwards, as Django does at the end of a request (no idle
    connections pile up)."""
    from django.db import close_old_connections, connections

    def run(*args: Any) -> Any:
        close_old_connections()
        try:
            return execute(*args)
        finally:
            connections.close_all()

    run.__name__ = getattr(execute, "__name__", "tool")
    run.__doc__ = execute.__doc__
    return run


def agent_names() -> list[str]:
    return sorted(settings.DEUZ_AGENTS)


def agent_get(name: str) -> Callable[[], AgentDefinition]:
    """The factory registered under ``name``; UnknownAgent when there is none."""
    path = settings.DEUZ_AGENTS.get(name) if isinstance(name, str) else None
    if path is None:
        raise UnknownAgent(str(name))
    return import_string(path)


@dataclass(frozen=True)
class LegContext:
    """What an agent's tools may need from the leg that runs them: the run, the owner epoch, the crash probe."""

    run_id: str
    epoch: int
    fault: Callable[[str], None] = lambda point: None


def agent_build(name: str, *, leg: LegContext | None = None) -> AgentDefinition:
    """A fresh definition (new model objects, so scripted models start their script anew)."""
    return agent_get(name)(leg=leg)
