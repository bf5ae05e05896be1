"""The agent registry: names runs can use, each a factory of model, tools and policy (settings.DEUZ_AGENTS: the
built-in demo agents plus the operator's own, from the DEUZ_AGENTS environment variable).

Checkpoints store data, not code, so every leg rebuilds its agent from here. A factory takes ``leg=`` (a
LegContext, or None outside a leg: listing, checking) and returns an AgentDefinition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from runs.errors import UnknownAgent
from runs.runtime.redact import redact
from runs.runtime.toolsets import Toolset
from runs.secrets.redaction import service_secrets
from runs.agents.retries import RetryPolicy, retry_policy_default

__all__ = [
    "APPROVALS_DECIDED_BY",
    "AgentDefinition",
    "LegContext",
    "agent_build",
    "agent_describe",
    "agent_get",
    "agent_list",
    "agent_names",
    "agent_approvals_decided_by",
    "db_tool",
]

#: Who decides an agent's approvals: reviewers (never the run's own creator: four eyes), or the run's creator (as
#: a chat user answers their own assistant's questions); reviewers and superusers may decide either.
APPROVALS_DECIDED_BY = ("reviewers", "creator")


@dataclass(frozen=True, kw_only=True)
class AgentDefinition:
    """What a leg needs to run an agent. With no ``approve_tool_call``, gated calls wait for a person:
    ``approvals_decided_by`` says who (APPROVALS_DECIDED_BY); ``retry`` says how transient model errors are retried
    (default: the DEUZ_MODEL_RETRY_* settings at build time)."""

    name: str
    model: Any
    tools: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 10
    system: str | None = None
    description: str = ""
    approve_tool_call: Callable[[dict[str, Any]], Any] | None = None
    retry: RetryPolicy = field(default_factory=retry_policy_default)
    approvals_decided_by: str = "reviewers"

    def __post_init__(self) -> None:
        if self.approvals_decided_by not in APPROVALS_DECIDED_BY:
            raise ValueError(f"approvals_decided_by is 'reviewers' or 'creator', not {self.approvals_decided_by!r}.")


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


def _needs_approval(needs: Any) -> str:
    if callable(needs):
        return "conditional"
    return "always" if needs else "never"


def _tool_description(name: str, tool: Any) -> dict[str, Any]:
    if isinstance(tool, Toolset):  # an MCP server's tools: each tool's annotations decide, as a leg lists them
        return {"name": name, "description": tool.description, "input_schema": {}, "needs_approval": "conditional",
                "effect": None}
    effect = getattr(tool, "effect", None)
    return {
        "name": name,
        "description": getattr(tool, "description", ""),
        "input_schema": getattr(tool, "input_schema", {}),
        "needs_approval": _needs_approval(getattr(tool, "needs_approval", False)),
        "effect": None if effect is None else {
            "operation_key": effect.operation_key is not None,
            "reconcile": effect.reconcile is not None,
            "verify": effect.verify is not None,
        },
    }


def agent_describe(name: str) -> dict[str, Any]:
    """What people and clients are told of an agent (``GET /api/agents/``, ``manage.py agents``): its name,
    description, who decides its approvals and its tools (built outside any leg, ``leg=None``)."""
    definition = agent_build(name)
    return {
        "name": name,
        "description": definition.description,
        "approvals_decided_by": definition.approvals_decided_by,
        "tools": [_tool_description(tool_name, tool) for tool_name, tool in sorted(definition.tools.items())],
    }


def agent_approvals_decided_by(name: str) -> str:
    """Who decides the approvals of ``name``'s runs (APPROVALS_DECIDED_BY); reviewers, the safe side, when the agent
    is unknown or cannot be built."""
    try:
        return agent_build(name).approvals_decided_by
    except Exception:
        return "reviewers"


def agent_list() -> list[dict[str, Any]]:
    """Every registered agent described, by name; one whose factory fails says why in ``problem`` (never a 500:
    `manage.py agents check` names the same problem)."""
    described = []
    for name in agent_names():
        try:
            described.append({**agent_describe(name), "problem": None})
        except Exception as exc:
            problem = redact(f"{type(exc).__name__}: {exc}", service_secrets())
            described.append({"name": name, "description": "", "approvals_decided_by": "reviewers", "tools": [],
                              "problem": problem})
    return described
