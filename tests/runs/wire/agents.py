"""Agents for tests, registered through the settings fixture (DEUZ_AGENTS)."""

from __future__ import annotations

from runs.agents import AgentDefinition
from runs.agents.retries import RetryPolicy
from runs.runtime import tool
from runs.runtime.testing import ScriptedModel


def _explode(request):
    raise ConnectionError("the model provider is down")


def broken_agent(*, leg=None) -> AgentDefinition:
    """Streams one step, then its model fails; with no retries, so its run fails at once."""
    return AgentDefinition(
        name="broken",
        max_steps=3,
        retry=RetryPolicy(attempts=0),
        model=ScriptedModel([
            {"content": [{"type": "text", "text": "Working on it."},
                         {"type": "tool_call", "tool_name": "noop", "input": {}}]},
            _explode,
        ]),
        tools={"noop": tool(execute=lambda i, ctx: "ok")},
    )
