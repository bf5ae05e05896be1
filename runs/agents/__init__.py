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

__all__ = ["AgentDefinition", "LegContext", "agent_build", "agent_get", "agent_names"]


@dataclass(frozen=True, kw_only=True)
class AgentDefinition:
    """What a leg needs to run an agent. With no ``approve_tool_call``, gated calls wait for reviewers."""

    name: str
    model: Any
    tools: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 10
    system: str | None = None
    description: str = ""
    approve_tool_call: Callable[[dict[str, Any]], Any] | None = None


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
