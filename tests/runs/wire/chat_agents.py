"""The chat probe for the AI SDK tests against a live server (test_chat_ai.py): an agent whose user decides its
approvals, whose scripted model appends every request it is sent to the JSON-lines file DEUZ_TEST_CHAT_LOG names (the
server is another process), and that talks slowly enough (DEUZ_DEMO_DELAY_MS per word) to be joined mid-turn.

Asked "gated ...", it looks the words up, then asks to act on them (approval needed), then answers; asked anything
else, it looks the words up and answers."""

from __future__ import annotations

import json
import os
from typing import Any

from django.conf import settings

from runs.agents import AgentDefinition
from runs.runtime import tool
from runs.runtime.testing import ScriptedModel

LOG_VARIABLE = "DEUZ_TEST_CHAT_LOG"


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else " ".join(part.get("text", "") for part in content)


def _policy(request: dict[str, Any]) -> dict[str, Any]:
    if path := os.environ.get(LOG_VARIABLE):
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(request["messages"], default=repr) + "\n")
    messages = request["messages"]
    last_user = max(index for index, message in enumerate(messages) if message["role"] == "user")
    asked = _text(messages[last_user])
    done = {part["tool_name"] for message in messages[last_user + 1:] if message["role"] == "tool"
            for part in message["content"]}
    if "lookup" not in done:
        return {"content": [{"type": "text", "text": "Looking that up."},
                            {"type": "tool_call", "tool_name": "lookup", "input": {"q": asked}}]}
    if asked.startswith("gated") and "act" not in done:
        return {"content": [{"type": "text", "text": "May I act on it?"},
                            {"type": "tool_call", "tool_name": "act", "input": {"q": asked}}]}
    words = " ".join(f"word{number}" for number in range(30))
    return {"content": [{"type": "text", "text": f"Answered {asked!r}: {words}."}]}


def _schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def chat_probe_agent(*, leg: Any = None) -> AgentDefinition:
    return AgentDefinition(
        name="chatprobe", approvals_decided_by="creator", max_steps=6,
        model=ScriptedModel([_policy] * 7, delay_ms=settings.DEUZ_DEMO_DELAY_MS, record=False),
        tools={
            "lookup": tool(description="Look up.", input_schema=_schema(),
                           execute=lambda tool_input, ctx: {"found": f"facts about {tool_input['q']}"}),
            "act": tool(description="Act; needs its user's approval.", input_schema=_schema(), needs_approval=True,
                        execute=lambda tool_input, ctx: {"done": tool_input["q"]}),
        },
    )
