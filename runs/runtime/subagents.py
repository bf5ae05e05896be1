"""Sub-agents as tools. A durable child checkpoints under its own key and suspends its parent."""

from __future__ import annotations

import asyncio
from typing import Any

from .engine import CallOptions, DurableSession, LegStart, SubAgentSuspended, run_leg
from .exceptions import CheckpointNotFoundError
from .loops import load_checkpoint
from .results import GenerateTextResult
from .tools import Tool, ToolContext
from .usage import empty_usage

__all__ = ["agent_tool", "child_run_id"]

_PROMPT_SCHEMA = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description": "The task for the sub-agent."}},
    "required": ["prompt"],
}


#: A sub-agent's parts its parent's stream does not repeat: the child leg's envelope (the parent's tool-call and
#: tool-result bracket it) and its approval requests (the parent's suspension announces them, with their agent_path).
_NOT_FORWARDED = frozenset({"start", "finish", "tool-approval-request"})


def _forwarding(ctx: ToolContext):
    """The child leg's emit: its parts into the parent's stream (tagged with its agent_path by the engine)."""

    def forward(part: dict[str, Any]) -> None:
        if part.get("type") not in _NOT_FORWARDED:
            ctx.emit(part)

    return forward


class SubAgentApprovalUnavailable(Exception):
    """A gated call inside a sub-agent with no inherited approver and no durable session to suspend."""


def child_run_id(parent_run_id: str, agent_name: str, tool_call_id: str) -> str:
    """Where a sub-agent call checkpoints: stable across legs because the tool call id is in the history."""
    return f"{parent_run_id}::{agent_name}#{tool_call_id}"


def agent_tool(
    *,
    name: str,
    model: Any,
    tools: Any,
    max_steps: int = 5,
    description: str = "",
    system: str | None = None,
) -> Tool:
    """A sub-agent as a tool: input ``{"prompt": str}``, output the sub-agent's final text."""

    async def execute(tool_input: dict[str, Any], ctx: ToolContext) -> str:
        prompt = tool_input.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise ValueError(f"Sub-agent {name!r} needs a non-empty 'prompt' string.")
        options = dict(
            model=model,
            tools=tools,
            max_steps=max_steps,
            system=system,
            approve_tool_call=ctx.approve_tool_call,
            approval_signer=ctx.approval_signer,
            approval_max_age_ms=ctx.approval_max_age_ms,
            signal=ctx.signal,
            deps=ctx.deps,
            effect_ledger=ctx.effect_ledger,
            agent_path=(*ctx.agent_path, name),
        )
        if ctx.store is None or ctx.run_id is None:
            messages = [{"role": "user", "content": prompt}]
            result = await run_leg(CallOptions(**options, messages=messages), LegStart(messages=messages),
                                   _forwarding(ctx))
            if result.finish_reason == "aborted":
                raise asyncio.CancelledError
            if result.finish_reason == "suspended":
                asked = ", ".join(sorted({r["tool_name"] for r in result.pending_approvals})) or "a client tool"
                raise SubAgentApprovalUnavailable(
                    f"Sub-agent {name!r} needs approval for {asked}, and no approver is available: "
                    "client-mode approval inside a sub-agent needs a durable session."
                )
            ctx.report_usage(result.usage)
            return result.text
        result = await _run_durable_child(ctx, name, prompt, options)
        if result.finish_reason == "aborted":  # the parent's signal: the parent is aborted too, its step unsaved
            raise asyncio.CancelledError
        if result.finish_reason == "suspended":
            raise SubAgentSuspended(result.pending_approvals, result.usage)
        ctx.report_usage(result.usage)
        return result.text

    return Tool(
        name=name,
        description=description or f"Delegate a task to the {name} sub-agent.",
        input_schema=_PROMPT_SCHEMA,
        execute=execute,
    )


async def _run_durable_child(ctx: ToolContext, name: str, prompt: str, options: dict[str, Any]) -> GenerateTextResult:
    key = child_run_id(ctx.run_id, name, ctx.tool_call_id)  # type: ignore[arg-type]
    session = DurableSession(store=ctx.store, run_id=key)  # type: ignore[arg-type]
    try:
        checkpoint = await load_checkpoint(ctx.store, key)  # type: ignore[arg-type]
    except CheckpointNotFoundError:
        messages = [{"role": "user", "content": prompt}]
        call = CallOptions(**options, messages=messages, session=session, binding_run_id=ctx.root_run_id)
        return await run_leg(call, LegStart(messages=messages), _forwarding(ctx))
    if checkpoint["status"] == "suspended" and not ctx.settling:
        # The child suspended, and the parent died before storing its own suspension: nobody was asked. Ask
        # again (the parent suspends with the child's requests) rather than deny what no one saw.
        raise SubAgentSuspended(list(checkpoint.get("pending_approvals") or []), empty_usage())
    # The parent re-executes this call on resume: the child settles its own pending calls from the
    # forwarded verdicts and goes on where it stopped (or answers again if it had completed).
    call = CallOptions(
        **options, session=session, binding_run_id=ctx.root_run_id, approval_responses=ctx.approval_responses
    )
    return await run_leg(call, LegStart.from_checkpoint(checkpoint), _forwarding(ctx))
