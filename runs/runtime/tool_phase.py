"""The tool phase of a step: each tool call's fate decided, the runnable ones executed, the step's end told.

Part of the step engine (``engine._StepEngine`` inherits ``ToolPhase``), kept apart because it is the one
concept of a step after the model call: unknown tools and cut-off inputs answered, gated calls sent to the
approval gate (gating.py), client tools waited for, the rest run at most ``max_tool_concurrency`` at once, and
a sub-agent that suspends out of the batch turning the whole step into a suspension.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .approvals import mint_request
from .exceptions import OwnershipLostError, RunHalted, StoreUnavailableError
from .redact import redact
from .tools import Tool, ToolContext
from .types import StreamPart, ToolApprovalRequest, Usage
from .usage import normalize_usage

if TYPE_CHECKING:
    from .deps import Deps
    from .engine import CallOptions

__all__ = ["SubAgentSuspended", "ToolCallFate", "ToolPhase", "ToolPhaseEnd", "tool_result", "tool_result_part"]


class SubAgentSuspended(Exception):
    """Raised out of a sub-agent tool whose durable child loop suspended on approvals or a client tool."""

    def __init__(self, pending: list[ToolApprovalRequest], usage: Usage) -> None:
        super().__init__("sub-agent suspended")
        self.pending = pending
        self.usage = usage


@dataclass
class ToolCallFate:
    """One tool call's fate in a tool phase."""

    call: dict[str, Any]
    result: dict[str, Any] | None = None  # the tool_result part
    pending: ToolApprovalRequest | None = None  # a request awaiting a client-mode verdict
    runnable: bool = False
    suspended: bool = False  # a sub-agent suspended out of it
    settled_by_verdict: bool = False
    approval: dict[str, Any] | None = None  # the approval bound to this call's exact request, for the ledger
    denial: str | None = None  # why an effectful call is not authorized (its ledger may still replay an outcome)
    edit: dict[str, Any] | None = None  # {"input", "by"}: the server-signed input a person approved instead

    @property
    def input(self) -> dict[str, Any]:
        """The input the call runs with: the model's, or the edit a person approved."""
        return self.edit["input"] if self.edit is not None else self.call["input"]


@dataclass
class ToolPhaseEnd:
    """A tool phase's end: results in call order, or None when the step suspends on ``requests``."""

    results: list[dict[str, Any]] | None
    requests: list[ToolApprovalRequest]
    usage: list[Usage]


class ToolPhase:
    """The step engine's tool phase; the attributes it reads are the engine's, ``_settle_call`` and
    ``_ask_approval`` are the approval gate's."""

    o: CallOptions
    deps: Deps
    run_id: str | None
    binding_run_id: str | None
    is_durable: bool
    store: Any
    messages: list
    responses: tuple
    semaphore: asyncio.Semaphore | None
    ledger: Any
    settling: bool
    emit: Any

    async def _tool_phase(
        self,
        step: int,
        calls: list[dict[str, Any]],
        tools: dict[str, Tool],
        *,
        settle: bool,
        pending: dict[str, ToolApprovalRequest],
    ) -> ToolPhaseEnd:
        fates = [ToolCallFate(call) for call in calls]
        waits_for_client = False
        for fate in fates:
            call = fate.call
            spec = tools.get(call["tool_name"])
            if call.get("input_error"):
                # The model's input was cut off or malformed: nothing runs, and the model reads why.
                fate.result = tool_result(call, call["input_error"], is_error=True)
            elif spec is None:
                fate.result = tool_result(call, f"Unknown tool: {call['tool_name']!r}.", is_error=True)
            elif not settle and (problem := spec.input_problem(call["input"])) is not None:
                fate.result = tool_result(call, problem, is_error=True)  # never asked for, never run: the model fixes it
            elif settle:
                await self._settle_call(fate, spec, pending.get(call["tool_call_id"]))
            elif spec.is_client_tool:
                waits_for_client = True
            elif await spec.requires_approval(call["input"]):
                await self._ask_approval(fate, spec)
            else:
                fate.runnable = True
        own_requests = [fate.pending for fate in fates if fate.pending is not None]
        if own_requests or waits_for_client:
            # Nothing runs in a step that waits for a person or a client: its siblings run on resume.
            return ToolPhaseEnd(None, own_requests, [])
        phase = ToolPhaseEnd(None, [], [])
        self.settling = settle
        await self._execute_all(step, [fate for fate in fates if fate.runnable], tools, phase)
        if phase.requests or any(fate.suspended for fate in fates):
            # A sub-agent suspended out of the batch: every result of the step is discarded (no tool
            # message is written for a suspended step), and verdicts this agent used are asked for again.
            again = [
                mint_request(
                    call=fate.call,
                    agent_path=self.o.agent_path,
                    deps=self.deps,
                    signer=self.o.approval_signer,
                    binding_run_id=self.binding_run_id if self.is_durable else None,
                )
                for fate in fates
                if fate.settled_by_verdict
            ]
            phase.requests = again + phase.requests
            return phase
        phase.results = [fate.result for fate in fates]  # type: ignore[misc]
        return phase

    async def _execute_all(
        self, step: int, runnable: list[ToolCallFate], tools: dict[str, Tool], phase: ToolPhaseEnd
    ) -> None:
        async def run_one(fate: ToolCallFate) -> None:
            if self.semaphore is None:
                await self._execute(step, fate, tools, phase)
            else:
                async with self.semaphore:
                    await self._execute(step, fate, tools, phase)

        await asyncio.gather(*(run_one(fate) for fate in runnable))

    async def _execute(self, step: int, fate: ToolCallFate, tools: dict[str, Tool], phase: ToolPhaseEnd) -> None:
        call = fate.call
        spec = tools[call["tool_name"]]
        ctx = ToolContext(
            tool_call_id=call["tool_call_id"],
            tool_name=call["tool_name"],
            run_id=self.run_id,
            step_index=step,
            messages=self.messages,
            agent_path=self.o.agent_path,
            deps=self.deps,
            signal=self.o.signal,
            store=self.store,
            root_run_id=self.binding_run_id,
            approval_responses=self.responses,
            approve_tool_call=self.o.approve_tool_call,
            approval_signer=self.o.approval_signer,
            approval_max_age_ms=self.o.approval_max_age_ms,
            report_usage=lambda extra: phase.usage.append(normalize_usage(extra)),
            effect_ledger=self.ledger,
            settling=self.settling,
            approval=fate.approval,
            denial=fate.denial,
            emit=self.emit,
        )
        if self.o.signal is not None and self.o.signal.is_set():
            raise asyncio.CancelledError  # no new tool call once the leg is aborted (the engine ends it so)
        try:
            output = await spec.run(fate.input, ctx)
        except SubAgentSuspended as suspension:
            phase.usage.append(suspension.usage)
            phase.requests.extend(suspension.pending)
            fate.suspended = True
            return
        except (OwnershipLostError, RunHalted, StoreUnavailableError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a failing tool is a result the model reacts to, never a dead run
            message = redact(str(exc) or type(exc).__name__, self.deps.secrets)
            fate.result = tool_result(call, message, is_error=True, edit=fate.edit)
            return
        fate.result = tool_result(call, output, is_error=False, edit=fate.edit)


def tool_result_part(result: Mapping[str, Any]) -> StreamPart:
    """A history tool result as the stream's ``tool-result`` part (with its ``edit`` when a person edited it)."""
    part: StreamPart = {
        "type": "tool-result",
        "tool_call_id": result["tool_call_id"],
        "tool_name": result["tool_name"],
        "output": result["output"],
        "is_error": result["is_error"],
    }
    if result.get("edit") is not None:
        part["edit"] = dict(result["edit"])
    return part


def tool_result(
    call: Mapping[str, Any], output: Any, *, is_error: bool, edit: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The history's ``tool_result`` part answering ``call``; ``edit`` ({"input", "by"}) when it ran with the input
    a person approved instead of the call's own (the call keeps the model's, so the history has both)."""
    result = {
        "type": "tool_result",
        "tool_call_id": call["tool_call_id"],
        "tool_name": call["tool_name"],
        "output": output,
        "is_error": is_error,
    }
    if edit is not None:
        result["edit"] = {"input": edit["input"], "by": edit.get("by")}
    return result
