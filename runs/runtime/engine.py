"""The step engine: the one agent loop behind generate_text, stream_chat and both resumes.

A leg runs steps (model call, then tool calls) and reports everything as stream parts through
``emit``. Durable legs save a checkpoint at every step boundary, and also right after the model
decides to call tools, so a crash in the tool phase never asks the model again.

This module holds the call's options, where a leg starts, and the loop of steps with its saves and its
end; the engine's other concepts are mixed into ``_StepEngine`` from their own modules: the model call
(model_call.py), the tool phase (tool_phase.py) and its approval gate (gating.py). One class, so a step
costs no more calls than when it was one module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .codec import CHECKPOINT_VERSION
from .deps import Deps
from .effect_ledger import InMemoryEffectLedger
from .exceptions import OwnershipLostError
from .faults import FaultPoint
from .gating import ApprovalGate
from .model_call import ModelCall, tool_call_part
from .redact import redact
from .results import GenerateTextResult, StepResult
from .stop import StopContext
from .stores import SessionStore, resolve
from .tool_phase import SubAgentSuspended, ToolPhase, tool_result_part
from .tools import Tool, normalize_tools
from .toolsets import list_leg_tools
from .types import AgentCheckpoint, Message, StreamPart, ToolApprovalRequest, Usage
from .usage import add_usage, empty_usage

__all__ = ["CallOptions", "DurableSession", "LegStart", "SubAgentSuspended", "run_leg"]

Emit = Callable[[StreamPart], None]


@dataclass(frozen=True)
class DurableSession:
    """``session=`` for durable calls: the store and the run id (minted when None)."""

    store: SessionStore
    run_id: str | None = None


@dataclass(kw_only=True)
class CallOptions:
    """Every option a call takes; resumes take all but ``messages`` and ``session``."""

    model: Any
    messages: list[Message] = field(default_factory=list)
    tools: Any = None
    max_steps: int = 1
    system: str | None = None
    session: DurableSession | Mapping[str, Any] | None = None
    approval_responses: Iterable[Mapping[str, Any]] | None = None
    approve_tool_call: Callable[[ToolApprovalRequest], Any] | None = None
    approval_signer: Any = None
    approval_max_age_ms: int | None = None
    stop_when: Any = None
    prepare_step: Callable[[PrepareStepContext], Any] | None = None
    max_tool_concurrency: int | None = None
    signal: asyncio.Event | None = None
    # Asked when ``signal`` stops the loop: a cancel's ``{"by", "reason"}`` ends the call with a ``cancelled`` part
    # and ``finish_reason == "cancelled"``; None (or no callable) keeps it "aborted" (a lost owner, a shutdown).
    cancellation: Callable[[], Mapping[str, Any] | None] | None = None
    deps: Deps | None = None
    # Where effectful tools record their operations (runs.runtime.effect_ledger); a fresh in-memory one per leg if None.
    effect_ledger: Any = None
    # Internal: set for sub-agents. The path of agent names, and the root run a token binds.
    agent_path: tuple[str, ...] = ()
    binding_run_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.max_steps, int) or isinstance(self.max_steps, bool) or self.max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {self.max_steps!r}.")
        if self.max_tool_concurrency is not None and self.max_tool_concurrency < 1:
            raise ValueError("max_tool_concurrency must be at least 1.")
        if not hasattr(self.model, "stream"):
            raise TypeError("model must have an async stream(request) method.")
        self.session = _as_session(self.session)
        self.deps = self.deps or Deps()


def _as_session(session: Any) -> DurableSession | None:
    if session is None or isinstance(session, DurableSession):
        return session
    if isinstance(session, Mapping):
        return DurableSession(store=session["store"], run_id=session.get("run_id"))
    raise TypeError("session must be a DurableSession or a dict with 'store' and optional 'run_id'.")


@dataclass(frozen=True)
class PrepareStepContext:
    step_index: int
    messages: list[Message]
    usage: Usage  # cumulative, whole run
    agent_path: tuple[str, ...]
    model: Any
    tools: dict[str, Tool]
    system: str | None


@dataclass(frozen=True)
class LegStart:
    """Where a leg begins: fresh from messages, or from a loaded checkpoint."""

    messages: list[Message]
    next_step_index: int = 0
    usage: Usage = field(default_factory=empty_usage)
    checkpoint: AgentCheckpoint | None = None

    @classmethod
    def from_checkpoint(cls, checkpoint: AgentCheckpoint) -> LegStart:
        """Continue after the checkpoint's step, with its history and its cumulative usage."""
        return cls(
            messages=list(checkpoint["messages"]),
            next_step_index=checkpoint["step_index"] + 1,
            usage=dict(checkpoint["usage"]),  # type: ignore[arg-type]
            checkpoint=checkpoint,
        )


class _Aborted(Exception):
    pass


def trailing_tool_calls(messages: list[Message]) -> list[dict[str, Any]]:
    """The tool calls of a last assistant message that no tool message answers yet."""
    if not messages or messages[-1]["role"] != "assistant":
        return []
    content = messages[-1]["content"]
    if isinstance(content, str):
        return []
    return [dict(part) for part in content if part.get("type") == "tool_call"]


def last_assistant_text(messages: list[Message]) -> str:
    for message in reversed(messages):
        if message["role"] == "assistant":
            return _text_of(message)
    return ""


def _text_of(message: Message) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def _tagged(emit: Emit, agent_path: tuple[str, ...]) -> Emit:
    """A sub-agent's emit: each of its parts carries its ``agent_path`` (a deeper agent's keeps its own, longer one);
    the top-level agent's parts carry none."""
    path = list(agent_path)

    def emit_tagged(part: StreamPart) -> None:
        emit(part if "agent_path" in part else {**part, "agent_path": path})

    return emit_tagged


def _stop_conditions(stop_when: Any) -> list[Callable[[StopContext], bool]]:
    if stop_when is None:
        return []
    if callable(stop_when):
        return [stop_when]
    return list(stop_when)


class _StepEngine(ModelCall, ToolPhase, ApprovalGate):
    """One leg of a run in the agent loop: its history, usage and steps, from its start to its finish."""

    def __init__(self, options: CallOptions, start: LegStart, emit: Emit) -> None:
        self.o = options
        self.deps: Deps = options.deps  # type: ignore[assignment]
        self.emit = _tagged(emit, options.agent_path) if options.agent_path else emit
        self.tools = normalize_tools(options.tools)
        session = options.session
        is_resume = start.checkpoint is not None
        self.is_durable = session is not None and (bool(self.tools) or is_resume)
        self.store = session.store if self.is_durable else None  # type: ignore[union-attr]
        self.run_id: str | None = None
        if self.is_durable:
            self.run_id = session.run_id or self.deps.generate_id()  # type: ignore[union-attr]
        self.binding_run_id = options.binding_run_id or self.run_id
        self.start = start
        self.initial_len = len(start.messages)
        self.messages: list[Message] = list(start.messages)
        self.total: Usage = dict(start.usage)  # type: ignore[assignment]
        self.leg_usage: Usage = empty_usage()
        # The usage of the step in flight, not yet accounted: an abort or a model error still reports it.
        self.unaccounted: Usage | None = None
        self.steps: list[StepResult] = []
        self.responses = tuple(options.approval_responses or ())
        self.stop_conditions = _stop_conditions(options.stop_when)
        self.semaphore = asyncio.Semaphore(options.max_tool_concurrency) if options.max_tool_concurrency else None
        self.ledger = options.effect_ledger if options.effect_ledger is not None else InMemoryEffectLedger()
        self.settling = False  # the tool phase in flight settles a suspension (its verdicts were asked for)

    # ----------------------------------------------------------------- the leg

    async def run(self) -> GenerateTextResult:
        self.emit({"type": "start", "run_id": self.run_id})
        checkpoint = self.start.checkpoint
        try:
            return await self._abortable(self._run_steps(checkpoint))
        except _Aborted:
            if self.unaccounted is not None:
                self._account(self.unaccounted)
            cancel = self.o.cancellation() if self.o.cancellation is not None else None
            if cancel is None:
                return self._finish("aborted")
            self.emit({"type": "cancelled", "by": cancel.get("by"), "reason": cancel.get("reason") or ""})
            return self._finish("cancelled")

    async def _run_steps(self, checkpoint: AgentCheckpoint | None) -> GenerateTextResult:
        step = self.start.next_step_index
        if checkpoint is not None and checkpoint["status"] == "completed":
            return self._finish("stop")
        trailing = trailing_tool_calls(self.messages)
        if checkpoint is not None and checkpoint["status"] == "running":
            restarted = checkpoint["step_index"] if trailing else checkpoint["step_index"] + 1
            self.emit(
                {
                    "type": "recovery",
                    "restarted_step_index": restarted,
                    "message": f"The previous leg was interrupted; the run restarts at step {restarted}.",
                }
            )
        if trailing:
            if checkpoint is not None and checkpoint["status"] == "running":
                # The model's decision was checkpointed: finish that step's tool phase, never re-asking it.
                suspended = await self._replay_decision(checkpoint["step_index"], trailing)
            else:
                suspended = await self._settle(step - 1, trailing, checkpoint)
            if suspended:
                return suspended
        leg_steps = 0
        while True:
            if step > 0 and self._should_stop(step):
                await self._save("completed", step - 1)
                return self._finish("stop-condition")
            if leg_steps >= self.o.max_steps:
                await self._save("completed", step - 1)
                return self._finish("max-steps")
            leg_steps += 1
            outcome = await self._step(step)
            if outcome is not None:
                return outcome
            step += 1

    def _should_stop(self, step_count: int) -> bool:
        ctx = StopContext(step_count=step_count, usage=dict(self.total), messages=self.messages)  # type: ignore[arg-type]
        return any(condition(ctx) for condition in self.stop_conditions)

    async def _step(self, step: int) -> GenerateTextResult | None:
        self._stop_if_aborted()
        model, tools, system = await self._prepare(step)
        self.emit({"type": "step-start", "step_index": step})
        text, calls, usage, step_reason = await self._call_model(step, model, tools, system)
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_call", **call} for call in calls]
        self.messages = [*self.messages, {"role": "assistant", "content": content}]
        if not calls:
            self._close_step(step, text, [], [], usage, step_reason)
            await self._save_boundary("completed", step)
            # A final answer cut off by the output limit or stopped by the content filter says so.
            return self._finish(step_reason if step_reason in ("length", "content-filter") else "stop")
        await self._save("running", step)
        self.deps.fault(FaultPoint.AFTER_MODEL_DECISION)
        return await self._tool_step(step, text, calls, usage, tools, settle=False, step_reason=step_reason)

    async def _replay_decision(self, step: int, calls: list[dict[str, Any]]) -> GenerateTextResult | None:
        """Run the tool phase of a checkpointed decision, re-emitting the decision for followers."""
        self.emit({"type": "step-start", "step_index": step})
        text = _text_of(self.messages[-1])
        if text:
            self.emit({"type": "text-delta", "text": text})
        for call in calls:
            self.emit(tool_call_part(call))
        return await self._tool_step(step, text, calls, empty_usage(), self.tools, settle=False, step_reason="tool-calls")

    async def _settle(
        self, step: int, calls: list[dict[str, Any]], checkpoint: AgentCheckpoint | None
    ) -> GenerateTextResult | None:
        """Answer a suspended step's trailing calls from the verdicts; its results stream before the leg's first step."""
        # Only this agent's own requests; deeper agents' requests are settled by the agents that made them.
        pending = {
            request["tool_call_id"]: request
            for request in (checkpoint or {}).get("pending_approvals") or []
            if tuple(request.get("agent_path") or ()) == self.o.agent_path
        }
        return await self._tool_step(step, "", calls, empty_usage(), self.tools, settle=True, pending=pending)

    async def _tool_step(
        self,
        step: int,
        text: str,
        calls: list[dict[str, Any]],
        usage: Usage,
        tools: dict[str, Tool],
        *,
        settle: bool,
        pending: dict[str, ToolApprovalRequest] | None = None,
        step_reason: str = "tool-calls",
    ) -> GenerateTextResult | None:
        phase = await self._tool_phase(step, calls, tools, settle=settle, pending=pending or {})
        for extra in phase.usage:
            usage = add_usage(usage, extra)
        if phase.results is None:
            self._account(usage)
            await self._save("suspended", step, pending_approvals=phase.requests)
            self.deps.fault(FaultPoint.AFTER_SUSPEND)
            for request in phase.requests:
                self.emit({"type": "tool-approval-request", "approval": request})
            return self._finish("suspended", pending_approvals=phase.requests)
        for result in phase.results:
            self.emit(tool_result_part(result))
        self.messages = [*self.messages, {"role": "tool", "content": phase.results}]  # type: ignore[list-item]
        if settle:
            self._account(usage)
        else:
            self._close_step(step, text, calls, phase.results, usage, step_reason)
        await self._save_boundary("running", step)
        return None

    def _close_step(self, step: int, text: str, calls: list, results: list, usage: Usage, finish_reason: str) -> None:
        self._account(usage)
        self.steps.append(StepResult(step, text, calls, results, usage, finish_reason))
        self.emit({"type": "step-finish", "step_index": step, "usage": usage, "finish_reason": finish_reason})

    def _account(self, usage: Usage) -> None:
        self.unaccounted = None
        self.total = add_usage(self.total, usage)
        self.leg_usage = add_usage(self.leg_usage, usage)

    async def _prepare(self, step: int) -> tuple[Any, dict[str, Tool], str | None]:
        """The model, tools and system prompt of ``step``, as ``prepare_step`` overrides them."""
        model, tools, system = self.o.model, self.tools, self.o.system
        if self.o.prepare_step is not None:
            ctx = PrepareStepContext(step, self.messages, dict(self.total), self.o.agent_path, model, tools, system)  # type: ignore[arg-type]
            overrides = await resolve(self.o.prepare_step(ctx)) or {}
            model = overrides.get("model", model)
            if "tools" in overrides:
                tools = normalize_tools(await list_leg_tools(overrides["tools"]))
            system = overrides.get("system", system)
        return model, tools, system

    # ------------------------------------------------------------ durability

    async def _save_boundary(self, status: str, step: int) -> None:
        self.deps.fault(FaultPoint.BEFORE_STEP_CHECKPOINT)
        await self._save(status, step)
        self.deps.fault(FaultPoint.AFTER_STEP_CHECKPOINT)

    async def _save(
        self, status: str, step: int, *, pending_approvals: list[ToolApprovalRequest] | None = None
    ) -> None:
        if not self.is_durable or step < 0:
            return
        checkpoint: AgentCheckpoint = {
            "version": CHECKPOINT_VERSION,
            "run_id": self.run_id,  # type: ignore[typeddict-item]
            "step_id": f"{self.run_id}#{step}",
            "step_index": step,
            "status": status,  # type: ignore[typeddict-item]
            "messages": self.messages,
            "usage": self.total,
            "created_at": self.deps.clock.now(),
        }
        if pending_approvals is not None:
            checkpoint["pending_approvals"] = pending_approvals
        if self.o.agent_path:
            checkpoint["agent_path"] = list(self.o.agent_path)
        try:
            await resolve(self.store.save(checkpoint))  # type: ignore[union-attr]
        except OwnershipLostError:
            raise
        except Exception as exc:  # durability is best effort; it must never kill the run
            self.deps.logger.error(
                "Saving checkpoint %s (%s) failed: %s",
                checkpoint["step_id"],
                status,
                redact(f"{type(exc).__name__}: {exc}", self.deps.secrets),
            )

    # --------------------------------------------------------------- ending

    def _finish(self, reason: str, *, pending_approvals: list[ToolApprovalRequest] | None = None) -> GenerateTextResult:
        self.emit({"type": "finish", "finish_reason": reason, "usage": self.leg_usage})
        if self.steps:
            text = self.steps[-1].text
        else:
            text = last_assistant_text(self.messages) if reason == "stop" else ""
        return GenerateTextResult(
            text=text,
            messages=self.messages,
            response_messages=self.messages[self.initial_len :],
            steps=self.steps,
            usage=self.leg_usage,
            total_usage=self.total,
            finish_reason=reason,
            pending_approvals=list(pending_approvals or []),
            run_id=self.run_id,
        )

    def _stop_if_aborted(self) -> None:
        """No new model call once the signal is set, even when nothing awaited since suspended (a model or tool
        that answers at once gives the signal's watcher no turn)."""
        if self.o.signal is not None and self.o.signal.is_set():
            raise _Aborted

    async def _abortable(self, coro: Any) -> Any:
        """Run ``coro``, stopping it at its next await point once the abort signal is set."""
        signal = self.o.signal
        if signal is None:
            return await coro
        if signal.is_set():
            coro.close()
            raise _Aborted
        work = asyncio.ensure_future(coro)
        watcher = asyncio.ensure_future(signal.wait())
        try:
            await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            work.cancel()
            watcher.cancel()
            raise
        if work.done():
            watcher.cancel()
            if work.cancelled() and signal.is_set():  # a tool or an effect refused to start (tool_phase, effects)
                raise _Aborted
            return work.result()
        work.cancel()
        try:
            await work
        except asyncio.CancelledError:
            pass
        raise _Aborted



async def run_leg(options: CallOptions, start: LegStart, emit: Emit | None = None) -> GenerateTextResult:
    """Run one leg of a run from ``start``, reporting parts through ``emit`` (dropped when None)."""
    if (listed := await list_leg_tools(options.tools)) is not options.tools:  # toolsets (MCP): listed per leg
        options = replace(options, tools=listed)
    return await _StepEngine(options, start, emit or _discard).run()


def _discard(part: StreamPart) -> None:
    return None
