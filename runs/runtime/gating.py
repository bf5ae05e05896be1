"""The approval gate of a tool phase: a gated call asked about, a suspended step's calls settled from verdicts.

Part of the step engine (``engine._StepEngine`` inherits ``ApprovalGate``; ``ToolPhase`` calls it for each
gated call). In server mode ``approve_tool_call`` decides inline; in client mode a signed request suspends the
step. On resume each trailing call is settled from ``approval_responses`` with the token checks of
approvals.py: approved runs, denied (or unanswered) is an ``is_error`` result, and an effectful call that is
not authorized still reaches its ledger, which may replay the outcome of an earlier, authorized attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .approvals import (
    DENIED_BY_DEFAULT_REASON,
    DENIED_REASON,
    Verdict,
    find_response,
    mint_request,
    settle_verdict,
)
from .stores import resolve
from .tool_phase import ToolCallFate, tool_result
from .tools import Tool
from .types import CLIENT_TOOL_NO_RESULT, StreamPart, ToolApprovalRequest

if TYPE_CHECKING:
    from .deps import Deps
    from .engine import CallOptions, LegStart

__all__ = ["ApprovalGate", "verdict_part"]


def verdict_part(
    call: Mapping[str, Any],
    approval_id: str | None,
    response: Mapping[str, Any] | None,
    verdict: Verdict,
) -> StreamPart:
    """The ``tool-approval-verdict`` part of a settled call: the verdict the runtime applied, and who gave it.

    ``decided_by`` is the response's (the service passes the reviewer's username as data); it is None when no
    person decided: an unanswered request (expired, superseded) or a verdict the token checks turned into a
    denial. ``edited`` says whether a person approved other input than the model's: then ``edit`` is
    ``{"input", "by"}``, as the server signed it.
    """
    given = response is not None and (response.get("approved") is True) == verdict.approved
    reason = verdict.reason if verdict.reason is not None else (response or {}).get("reason")
    return {
        "type": "tool-approval-verdict",
        "approval_id": approval_id,
        "tool_call_id": call["tool_call_id"],
        "approved": verdict.approved,
        "reason": reason if isinstance(reason, str) else "",
        "decided_by": (response or {}).get("decided_by") if given else None,
        "edited": verdict.edit is not None,
        **({"edit": dict(verdict.edit)} if verdict.edit is not None else {}),
    }


class ApprovalGate:
    """The step engine's approval gate; the attributes it reads are the engine's."""

    o: CallOptions
    deps: Deps
    start: LegStart
    binding_run_id: str | None
    is_durable: bool
    responses: tuple
    emit: Callable[[StreamPart], None]

    async def _settle_call(self, fate: ToolCallFate, spec: Tool, request: ToolApprovalRequest | None) -> None:
        call = fate.call
        if spec.is_client_tool:
            fate.result = tool_result(call, CLIENT_TOOL_NO_RESULT, is_error=True)
            return
        is_resume = self.start.checkpoint is not None
        if request is None and not await spec.requires_approval(call["input"]):
            fate.runnable = True  # a sibling or a sub-agent: runs (again) now
            return
        if request is None and is_resume:
            # Gated, but no request was stored: it was decided inline in a leg whose step a sub-agent
            # suspended. Ask the server-mode approver again, or deny (the safe side).
            if self.o.approve_tool_call is not None:
                await self._ask_approval(fate, spec)
            else:
                fate.result = tool_result(call, DENIED_BY_DEFAULT_REASON, is_error=True)
            return
        approval_id = request["approval_id"] if request else None
        response = find_response(self.responses, approval_id=approval_id, tool_call_id=call["tool_call_id"])
        verdict = settle_verdict(
            response,
            approval_id=approval_id,
            tool_call_id=call["tool_call_id"],
            signer=self.o.approval_signer,
            max_age_ms=self.o.approval_max_age_ms,
            binding_run_id=self.binding_run_id,
            tool_name=call["tool_name"],
            tool_input=call["input"],
        )
        fate.settled_by_verdict = True
        self.emit(verdict_part(call, approval_id, response, verdict))
        if verdict.approved:
            fate.runnable = True
            approved = verdict.payload or request or call
            fate.approval = {"approval_id": approval_id, "tool_name": approved.get("tool_name"),
                                "input": approved.get("input"), "revision": (self.start.checkpoint or {}).get("step_id")}
            if verdict.edit is not None:  # the call runs with the input the server signed, and says whose it is
                fate.edit = dict(verdict.edit)
                fate.approval["edited_by"] = verdict.edit["by"]
        elif spec.effect is not None:
            # Not authorized to attempt; the ledger may still hold the outcome of an earlier, authorized attempt.
            fate.runnable, fate.denial = True, verdict.reason
        else:
            fate.result = tool_result(call, verdict.reason, is_error=True)

    async def _ask_approval(self, fate: ToolCallFate, spec: Tool) -> None:
        call = fate.call
        is_client_mode = self.o.approve_tool_call is None
        request = mint_request(
            call=call,
            agent_path=self.o.agent_path,
            deps=self.deps,
            signer=self.o.approval_signer if is_client_mode else None,
            binding_run_id=self.binding_run_id if self.is_durable else None,
            operation_id=spec.business_operation_id(call["tool_name"], call["input"]),
        )
        if is_client_mode:
            fate.pending = request  # suspend for a verdict
        elif await resolve(self.o.approve_tool_call(request)):
            fate.runnable = True
            fate.approval = {"approval_id": request["approval_id"], "tool_name": call["tool_name"],
                                "input": call["input"]}
        else:
            fate.result = tool_result(call, DENIED_REASON, is_error=True)
