"""A probe agent for the threads' tests: its scripted model records every request it is sent (in MODELS), so a test
asserts on what a turn's model saw. Asked "gated ...", it calls a tool that waits for approval; else it looks the
text up and answers."""

from __future__ import annotations

from typing import Any

from runs.agents import AgentDefinition
from runs.runtime import tool
from runs.runtime.testing import ScriptedModel

#: Every model the probe agent built, in order (a test clears it first).
MODELS: list[ScriptedModel] = []


def _last_user_text(request: dict[str, Any]) -> str:
    user = [message for message in request["messages"] if message["role"] == "user"][-1]
    content = user["content"]
    return content if isinstance(content, str) else " ".join(part.get("text", "") for part in content)


def _policy(request: dict[str, Any]) -> dict[str, Any]:
    last = request["messages"][-1]
    text = _last_user_text(request)
    if last["role"] == "user":
        name = "gated" if text.startswith("gated") else "lookup"
        return {"content": [{"type": "text", "text": "Looking."},
                            {"type": "tool_call", "tool_name": name, "input": {"q": text}}]}
    return {"content": [{"type": "text", "text": f"Answered {text!r}."}]}


def _schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def probe_agent(*, leg: Any = None) -> AgentDefinition:
    model = ScriptedModel([_policy] * 5)
    MODELS.append(model)
    return AgentDefinition(
        name="probe", model=model, max_steps=4,
        tools={
            "lookup": tool(description="Look up.", input_schema=_schema(),
                           execute=lambda tool_input, ctx: {"found": f"facts about {tool_input['q']}"}),
            "gated": tool(description="Needs approval.", input_schema=_schema(), needs_approval=True,
                          execute=lambda tool_input, ctx: {"done": True}),
        },
    )


def sent_requests() -> list[dict[str, Any]]:
    """Every request the probe's models were sent, oldest first."""
    return [request for model in MODELS for request in model.requests]
