"""An agent on the test MCP server, for runs through the worker: its server is the DEUZ_MCP_SERVERS entry
"records" (the tests set it, in this process and in the worker processes they start)."""

from __future__ import annotations

from typing import Any

from runs.agents import AgentDefinition, LegContext
from runs.runtime.mcp import mcp_tools
from runs.runtime.testing import ScriptedModel


def _policy(request: dict[str, Any]) -> dict[str, Any]:
    done = [part for message in request["messages"] if message["role"] == "tool" for part in message["content"]]
    calls = [("lookup", {"key": "a"}), ("delete_record", {"key": "a"})]
    if len(done) < len(calls):
        name, tool_input = calls[len(done)]
        return {"content": [{"type": "tool_call", "tool_name": name, "input": tool_input}]}
    return {"content": [{"type": "text", "text": " | ".join(f"{p['tool_name']}: {p['output']}" for p in done)}]}


def records_agent(*, leg: LegContext | None = None) -> AgentDefinition:
    """Looks a record up (read-only: no approval), then deletes it (destructive: approval, ledger)."""
    return AgentDefinition(name="records", model=ScriptedModel([_policy] * 4), tools={"records": mcp_tools("records")},
                           max_steps=4)
