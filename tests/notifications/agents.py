"""An agent for the webhook tests whose model fails at once, so its run fails (run.failed)."""

from __future__ import annotations

from typing import Any

from runs.agents import AgentDefinition


class _BrokenModel:
    model_id = "broken"

    async def stream(self, request: Any):
        raise RuntimeError("This test model always fails.")
        yield  # an async generator, as models are


def broken_agent(*, leg: Any = None) -> AgentDefinition:
    return AgentDefinition(name="broken", model=_BrokenModel(), description="Fails its first step.")
