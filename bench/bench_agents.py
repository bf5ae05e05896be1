"""The agents the fleet benchmarks run in daphne and worker processes (registered by bench.fleet_settings).

Their models are scripted policies (each answer a function of the history), so a leg resumed in another
process continues the same conversation, as the demo agents do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings

from bench.workload import TOOL_RESULT
from runs.agents import AgentDefinition, LegContext
from runs.runtime import tool
from runs.runtime.testing import ScriptedModel

__all__ = ["AGENTS", "PacedModel", "PolicyModel", "approval_agent", "cancel_agent", "steps_agent", "tail_agent"]

#: name -> factory, added to DEUZ_AGENTS in the fleet's processes and the bench's own.
AGENTS = {
    "bench-approval": "bench.bench_agents.approval_agent",
    "bench-cancel": "bench.bench_agents.cancel_agent",
    "bench-steps": "bench.bench_agents.steps_agent",
    "bench-tail": "bench.bench_agents.tail_agent",
}

_USAGE = {"input_tokens": 10, "output_tokens": 5}


def _tool_results(request: dict[str, Any]) -> int:
    return sum(len(message["content"]) for message in request["messages"] if message["role"] == "tool")


def _approval_policy(request: dict[str, Any]) -> dict[str, Any]:
    if not _tool_results(request):
        return {"content": [{"type": "text", "text": "Asking a reviewer first."},
                            {"type": "tool_call", "tool_name": "act", "input": {"what": "bench"}}], "usage": _USAGE}
    return {"content": [{"type": "text", "text": "Done."}], "usage": _USAGE}


async def _act(tool_input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"done": True}


def approval_agent(*, leg: LegContext | None = None) -> AgentDefinition:
    """One gated tool call, then a short answer: the verdict's leg runs the tool and answers."""
    return AgentDefinition(
        name="bench-approval", max_steps=3, model=ScriptedModel([_approval_policy] * 3, model_id="bench-approval", record=False),
        tools={"act": tool(execute=_act, description="Do it, once a reviewer agrees.", needs_approval=True)},
    )


class PolicyModel:
    """The lightest scripted model: each answer is ``policy(request)``, streamed as ScriptedModel streams it,
    without ScriptedModel's deep copy of every request (kept for tests' assertions, it grows with the history
    and would be most of a long run's model time) or its random tool call ids."""

    def __init__(self, policy: Any, *, model_id: str) -> None:
        self.policy = policy
        self.model_id = model_id
        self.pricing = None

    async def stream(self, request: Any) -> AsyncIterator[dict[str, Any]]:
        response = self.policy(request)
        for part in response["content"]:
            if part["type"] == "text":
                yield {"type": "text-delta", "text": part["text"]}
            else:
                yield {"type": "tool-call", "tool_call_id": part["tool_call_id"], "tool_name": part["tool_name"],
                       "input": dict(part["input"])}
        yield {"type": "finish", "usage": dict(response["usage"])}


def _steps() -> int:
    return int(getattr(settings, "DEUZ_BENCH_STEPS", 20))


def _steps_policy(request: dict[str, Any]) -> dict[str, Any]:
    done = _tool_results(request)
    if done < _steps() - 1:
        return {"content": [{"type": "tool_call", "tool_call_id": f"call_{done}", "tool_name": "lookup",
                             "input": {"row": done}}], "usage": _USAGE}
    return {"content": [{"type": "text", "text": "All records checked."}], "usage": _USAGE}


async def _lookup(tool_input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return TOOL_RESULT


def steps_agent(*, leg: LegContext | None = None) -> AgentDefinition:
    """The bench workload (bench.workload) as a worker runs it: DEUZ_BENCH_STEPS steps, one tool call a step
    answered by ~300 bytes of JSON, then a final answer."""
    steps = _steps()
    return AgentDefinition(
        name="bench-steps", max_steps=steps, model=PolicyModel(_steps_policy, model_id="bench-steps"),
        tools={"lookup": tool(execute=_lookup, description="Look one record up.")},
    )


class PacedModel(ScriptedModel):
    """A ScriptedModel that waits ``lead_ms`` before its first answer (so followers are in place), then streams
    each word as a text delta ``delay_ms`` apart, like a model generating tokens."""

    def __init__(self, responses: Any, *, lead_ms: int, **options: Any) -> None:
        super().__init__(responses, **options)
        self.lead_ms = lead_ms

    async def stream(self, request: Any) -> AsyncIterator[dict[str, Any]]:
        if self.lead_ms and not self.calls:
            await asyncio.sleep(self.lead_ms / 1000)
        async for part in super().stream(request):
            yield part


def tail_agent(*, leg: LegContext | None = None) -> AgentDefinition:
    """One answer of DEUZ_BENCH_TAIL_PARTS words, DEUZ_BENCH_TAIL_INTERVAL_MS apart, after DEUZ_BENCH_TAIL_LEAD_MS."""
    words = int(getattr(settings, "DEUZ_BENCH_TAIL_PARTS", 30))
    text = " ".join(f"w{index}" for index in range(words))
    model = PacedModel([{"content": [{"type": "text", "text": text}], "usage": _USAGE}], model_id="bench-tail",
                       delay_ms=int(getattr(settings, "DEUZ_BENCH_TAIL_INTERVAL_MS", 100)),
                       lead_ms=int(getattr(settings, "DEUZ_BENCH_TAIL_LEAD_MS", 2000)))
    return AgentDefinition(name="bench-tail", max_steps=1, model=model)


def cancel_agent(*, leg: LegContext | None = None) -> AgentDefinition:
    """One long answer (a word every DEUZ_BENCH_CANCEL_INTERVAL_MS for minutes), then a tool call it never gets to:
    a leg that is always mid-step when the cancel bench (bench.cancel) cancels it."""
    text = " ".join(f"w{index}" for index in range(5000))
    answer = {"content": [{"type": "text", "text": text},
                          {"type": "tool_call", "tool_name": "act", "input": {"what": "never"}}], "usage": _USAGE}
    model = ScriptedModel([answer, answer], model_id="bench-cancel", record=False,
                          delay_ms=int(getattr(settings, "DEUZ_BENCH_CANCEL_INTERVAL_MS", 20)))
    return AgentDefinition(name="bench-cancel", max_steps=2, model=model,
                           tools={"act": tool(execute=_act, description="Do it.")})
