"""A pretend provider and scripted agents for the pure ledger tests: no Django, no database."""

from __future__ import annotations

from typing import Any

from runs.runtime import Effect, tool
from runs.runtime.testing import ScriptedModel


class Crash(BaseException):
    """Stands in for SIGKILL at a fault point: not an Exception, so no tool or loop handler swallows it."""


def crash_at(point: str, nth: int = 1):
    """A ``deps.fault`` that raises Crash the ``nth`` time ``point`` is reached."""
    seen = {"count": 0}

    def fault(reached: str) -> None:
        if reached == point:
            seen["count"] += 1
            if seen["count"] == nth:
                raise Crash(point)

    return fault


class Provider:
    """A payment provider: one payment per operation id (its idempotency key). It can commit then time out,
    refuse, time out before committing, or be unreadable (its lookups fail)."""

    def __init__(self) -> None:
        self.payments: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []
        self.mode = "normal"  # normal | commit-then-timeout | timeout-before-commit | refuse | crash-before-commit
        self.reads_fail = False
        self.tampered = False  # the provider's record says another amount than asked

    def pay(self, tool_input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        operation_id = ctx.effect.operation_id
        self.calls.append(operation_id)
        if self.mode == "refuse":
            raise ValueError("The card was declined.")
        if self.mode == "timeout-before-commit":
            raise TimeoutError("The provider did not answer.")
        if self.mode == "crash-before-commit":  # the worker dies during the call, before the request left
            self.mode = "normal"
            raise Crash("during the call")
        record = self.payments.setdefault(
            operation_id, {"transaction_id": f"tx-{len(self.payments) + 1}", "operation_id": operation_id, **tool_input}
        )
        if self.tampered:
            record["amount"] = "0.01"
        if self.mode == "commit-then-timeout":
            raise TimeoutError("The provider did not answer.")
        return dict(record)

    def lookup(self, call: Any) -> dict[str, Any] | None:
        if self.reads_fail:
            raise ConnectionError("The provider cannot be reached.")
        record = self.payments.get(call.operation_id)
        return dict(record) if record is not None else None

    def verify(self, call: Any, output: Any) -> bool:
        record = self.lookup(call)
        return record is not None and all(record[key] == call.input[key] for key in ("amount", "recipient"))

    def pay_tool(self, *, reconcile: bool = True, verify: bool = True, needs_approval: bool = False):
        return tool(
            name="pay",
            description="Pay someone.",
            input_schema={"type": "object", "properties": {"amount": {"type": "string"},
                                                           "recipient": {"type": "string"}}},
            execute=self.pay,
            needs_approval=needs_approval,
            effect=Effect(reconcile=self.lookup if reconcile else None, verify=self.verify if verify else None),
        )


def paying_model(*, amount: str = "84.20", recipient: str = "Ada", again_after_error: bool = False) -> ScriptedModel:
    """Calls ``pay`` once (call-1), then reports the result; with ``again_after_error`` it tries once more (call-2)
    after an error result. A policy of the history, so a resumed leg continues the same conversation."""

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        results = [part for message in request["messages"] if message["role"] == "tool" for part in message["content"]]
        if not results or (again_after_error and len(results) == 1 and results[0]["is_error"]):
            call_id = f"call-{len(results) + 1}"
            return {"content": [{"type": "tool_call", "tool_name": "pay", "tool_call_id": call_id,
                                 "input": {"amount": amount, "recipient": recipient}}]}
        last = results[-1]
        text = f"error: {last['output']}" if last["is_error"] else f"paid {last['output']['transaction_id']}"
        return {"content": [{"type": "text", "text": text}]}

    return ScriptedModel([policy] * 8)
