"""Effects: a tool that changes the outside world is performed at most once per operation, whatever crashes.

A tool declares itself effectful with ``tool(..., effect=Effect(...))``. Each of its calls then has an
operation id (run id + tool call id: stable, because the decision checkpoint fixes the tool call id), a
fingerprint (a digest of the canonical JSON of the tool name and its input) and the ledger's owner epoch,
and goes through an ``EffectLedger``. The rules are written once, here (``perform_effect``); a ledger only
stores entries and their transitions, each with its time, owner epoch and actor:

  proposed -> approved -> attempted -> committed -> verified
                             |-> failed              (the tool refused)
                             |-> unknown             (a timeout) -> committed | needs_review
  attempted, found by a later leg: reconcile first: committed (record, replay), absent (attempt again with the
      same id), unreadable or no ``reconcile`` (needs_review)
  needs_review -> approved (a person: retry) | committed (a person: receipt) | failed (a person: abandon)

Same operation id and fingerprint: the stored result is replayed and the tool is not called. Same id, other
fingerprint: ``EffectConflictError``. An approval-gated effect is attempted only with an approval bound to its
exact request. While a stop switch is on, no new attempt starts (``EffectsStopped``); replays and
reconciliation go on. The ledgers, their states and the moves allowed between them are in
``runs.runtime.effect_ledger`` (``InMemoryEffectLedger``, the reference one; the database one is
``runs.stores.ledger.DatabaseEffectLedger``); their names are importable from here too.

Business operations: ``Effect(operation_key=...)`` names the operation by what it does ("exp-1042-v1"), not by
the tool call, so its id, ``f"{tool_name}:{key}"``, is shared by every run of every agent. Only the run that
opened it attempts, reconciles or retries it, under its own fencing epoch. Another run that reaches the same
key, once its own approval (if the tool needs one) allows the call: a committed or verified entry is replayed
(its output says by which run and when, under ``replayed_from``), one still open makes the run wait
(``EffectHeldElsewhere``: its leg ends and it is queued again when the entry settles), one that needs review
makes it need review too, a failed one is its failure again, and another fingerprint is a conflict. Two runs
racing on a new key meet at one entry: the ledger's ``open`` answers the entry that won.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .codec import encode_value
from .effect_ledger import (
    APPROVED,
    ATTEMPTED,
    COMMITTED,
    EFFECT_STATUSES,
    EFFECTS_STOPPED_REASON,
    FAILED,
    NEEDS_REVIEW,
    PROPOSED,
    UNKNOWN,
    VERIFIED,
    EffectEntry,
    EffectLedger,
    InMemoryEffectLedger,
    effect_advance_check,
    effect_transition_is_allowed,
)
from .exceptions import (
    EffectConflictError,
    EffectHeldElsewhere,
    EffectNeedsReview,
    EffectNotAuthorized,
    EffectsStopped,
    OwnershipLostError,
    RunHalted,
)
from .faults import FaultPoint
from .redact import redact
from .stores import resolve, root_run_id

if TYPE_CHECKING:
    from .tools import Tool, ToolContext

__all__ = [
    "APPROVAL_MISMATCH_REASON",
    "EFFECTS_STOPPED_REASON",
    "EFFECT_STATUSES",
    "Effect",
    "EffectCall",
    "EffectEntry",
    "EffectLedger",
    "InMemoryEffectLedger",
    "business_operation_id",
    "effect_advance_check",
    "effect_fingerprint",
    "effect_operation_id",
    "effect_transition_is_allowed",
    "perform_effect",
]

APPROVAL_MISMATCH_REASON = "The approval was given for other arguments than this call's; the tool was not called."
_DENIED_BY_DEFAULT = "No verdict was given for this tool call; it was denied by default."

#: What ``via`` says about where an outcome came from.
_OUTCOME_SOURCES = {"tool": "tool", "reconcile": "reconciliation", "person": "person"}


def _canonical(value: Any) -> str:
    return json.dumps(encode_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def effect_fingerprint(tool_name: str, tool_input: Any) -> str:
    """The SHA-256 hex digest of the canonical JSON of the tool name and the (identifying part of the) input."""
    return hashlib.sha256(_canonical({"tool": tool_name, "input": tool_input}).encode()).hexdigest()


def effect_operation_id(run_id: str | None, tool_call_id: str) -> str:
    """The operation id of a call: run id + tool call id (the tool call id alone without a durable run)."""
    return f"{run_id}:{tool_call_id}" if run_id else tool_call_id


def business_operation_id(tool_name: str, key: str) -> str:
    """The operation id of a business operation (``Effect(operation_key=...)``), the same in every run."""
    return f"{tool_name}:{key}"


def _is_unknown_outcome(exc: BaseException) -> bool:
    return isinstance(exc, (TimeoutError, ConnectionError))


@dataclass(frozen=True, kw_only=True)
class Effect:
    """What makes a tool effectful, given as ``tool(..., effect=Effect(...))``; every callback may be sync or async.

    ``reconcile(call)`` asks the outside system what it knows of ``call.operation_id``: the output it would have
    returned when the operation happened, None when it did not; raising means it cannot be asked. ``verify(call,
    output)`` reads the outcome independently (amount, recipient...) and answers whether it matches.
    ``fingerprint(input)`` picks the part of the input that identifies the request (default: all of it).
    ``is_unknown_outcome(exc)`` tells an exception after which the effect may have happened (default: timeouts
    and connection errors) from a refusal. ``operation_key(input)`` names the business operation (a non-empty
    string, e.g. ``f"{expense_id}-v1"``), shared by every run: see the module docstring.
    """

    reconcile: Callable[[EffectCall], Any] | None = None
    verify: Callable[[EffectCall, Any], Any] | None = None
    fingerprint: Callable[[dict[str, Any]], Any] | None = None
    is_unknown_outcome: Callable[[BaseException], bool] = _is_unknown_outcome
    operation_key: Callable[[dict[str, Any]], str] | None = None


@dataclass(frozen=True, kw_only=True)
class EffectCall:
    """One operation as its tool, ``reconcile`` and ``verify`` see it (``ctx.effect`` in ``execute``): pass
    ``operation_id`` to the outside system as its idempotency key."""

    operation_id: str
    run_id: str | None
    tool_call_id: str
    tool_name: str
    input: dict[str, Any]
    fingerprint: str
    epoch: int
    attempt: int = 0



async def _call(function: Callable[..., Any], *args: Any) -> Any:
    """Call a callback; a sync one runs in a thread so it may block (or use a sync ORM)."""
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    result = await asyncio.to_thread(function, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


@dataclass
class _Operation:
    """One call going through the ledger: the tool, its call, and the entry as last written."""

    tool: Tool
    call: EffectCall
    ctx: ToolContext
    ledger: Any
    entry: EffectEntry = field(default_factory=dict)  # type: ignore[assignment]

    @property
    def spec(self) -> Effect:
        return self.tool.effect  # type: ignore[return-value]

    @property
    def label(self) -> str:
        return f"{self.call.tool_name} operation {self.call.operation_id}"

    def _redacted(self, exc: BaseException) -> str:
        return redact(f"{type(exc).__name__}: {exc}", self.ctx.deps.secrets)[:2000]

    async def advance(self, status: str, *, via: str, note: str = "", evidence: Any = None, **changes: Any) -> None:
        if via in _OUTCOME_SOURCES and status in (COMMITTED, FAILED):
            changes.setdefault("outcome_source", _OUTCOME_SOURCES[via])
        self.entry = await resolve(self.ledger.advance(
            self.call.operation_id, expected=self.entry["status"], status=status, via=via, note=note,
            evidence=evidence, changes=changes,
        ))

    async def needs_review(self, why: str, *, via: str, evidence: Any = None) -> EffectNeedsReview:
        """Record that a person must decide, and the error that stops the leg."""
        await self.advance(NEEDS_REVIEW, via=via, note=why, evidence=evidence)
        return EffectNeedsReview(f"{why} ({self.label}); a person must review the run before anything is retried.")

    async def reconcile(self) -> tuple[bool, Any]:
        """Ask the outside system; (True, output) when the operation happened, (False, None) when it did not.
        Raises EffectNeedsReview when it cannot be asked (or there is no ``reconcile``)."""
        if self.spec.reconcile is None:
            raise await self.needs_review("The outcome is unknown and the tool has no reconcile", via="reconcile")
        try:
            found = await _call(self.spec.reconcile, self.call)
        except (OwnershipLostError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise await self.needs_review(
                "The outcome is unknown and the outside system cannot be asked", via="reconcile",
                evidence={"error": self._redacted(exc)},
            ) from exc
        if found is None:
            await self.advance(self.entry["status"], via="reconcile", note="The outside system has no record of it.",
                               evidence={"found": None})
            return False, None
        await self.advance(COMMITTED, via="reconcile", note="The outside system has a record of it.",
                           evidence={"found": found}, output=found, error="")
        self.ctx.deps.fault(FaultPoint.AFTER_EFFECT_RECORD)
        return True, found

    async def settled(self) -> Any:
        """The committed (or verified) outcome, verified first when the tool can verify."""
        output = self.entry.get("output")
        if self.entry["status"] != COMMITTED or self.spec.verify is None:
            return output
        try:
            matches = await _call(self.spec.verify, self.call, output)
        except (OwnershipLostError, asyncio.CancelledError):
            raise
        except Exception as exc:  # unread, not contradicted: the outcome stands unverified
            await self.advance(COMMITTED, via="verify", note="The outcome could not be read back to verify it.",
                               evidence={"error": self._redacted(exc)})
            return output
        if not matches:
            raise await self.needs_review("The outcome read back does not match the request", via="verify",
                                          evidence={"output": output})
        await self.advance(VERIFIED, via="verify", note="The outcome was read back and matches the request.")
        return output

    async def authorize(self) -> None:
        """An approval-gated effect needs an approval of its exact request, or a person's retry of this entry."""
        if not await self.tool.requires_approval(self.call.input):
            return
        approval = self.ctx.approval
        resolution = self.entry.get("approval") or {}
        if approval is None:
            if self.entry.get("status") == APPROVED and resolution.get("by_person"):
                return
            raise EffectNotAuthorized(self.ctx.denial or _DENIED_BY_DEFAULT)
        self._check_approved_request(approval)
        if self.entry.get("status") == PROPOSED:
            binding = {key: approval[key] for key in ("approval_id", "revision", "edited_by")
                       if approval.get(key) is not None}
            binding["fingerprint"] = self.call.fingerprint
            await self.advance(APPROVED, via="approval", note="Approved for this exact request.", approval=binding)

    def _check_approved_request(self, approval: Mapping[str, Any]) -> None:
        approved_input = approval.get("input", self.call.input)
        if approval.get("tool_name", self.call.tool_name) != self.call.tool_name or (
            self.tool.fingerprint_of(self.call.tool_name, approved_input) != self.call.fingerprint
        ):
            raise EffectNotAuthorized(APPROVAL_MISMATCH_REASON)

    async def authorize_here(self) -> None:
        """This run's own approval of this call, when the tool needs one: another run's operation is replayed or
        waited for only for a call this run was allowed to make (an approval authorizes its own run only)."""
        if not await self.tool.requires_approval(self.call.input):
            return
        if self.ctx.approval is None:
            raise EffectNotAuthorized(self.ctx.denial or _DENIED_BY_DEFAULT)
        self._check_approved_request(self.ctx.approval)

    @property
    def opened_by(self) -> str | None:
        """The run that opened the entry, when it is another run than this call's (a shared business operation)."""
        owner = self.entry.get("run_id")
        if owner is None or self.call.run_id is None or root_run_id(owner) == root_run_id(self.call.run_id):
            return None
        return root_run_id(owner)

    async def elsewhere(self, opened_by: str) -> Any:
        """The call meets an operation another run opened: replay it, wait for it, or share its fate."""
        await self.authorize_here()
        entry, status = self.entry, self.entry["status"]
        if entry["fingerprint"] != self.call.fingerprint:
            await self.advance(status, via="conflict", note=f"Refused for run {self.call.run_id}: the same "
                               "operation with another request.", evidence={"fingerprint": self.call.fingerprint,
                                                                          "run_id": self.call.run_id})
            raise EffectConflictError(
                f"Operation {self.call.operation_id} was performed by run {opened_by} for a different request; "
                "refusing to perform it again with other arguments."
            )
        if status in (COMMITTED, VERIFIED):
            performed_at = entry.get("settled_at")
            await self.advance(status, via="replay", note=f"Replayed for run {self.call.run_id}.",
                               evidence={"run_id": self.call.run_id})
            output = entry.get("output")
            if isinstance(output, Mapping):
                replayed = {"run_id": opened_by, "operation_id": self.call.operation_id, "performed_at": performed_at}
                return {**output, "replayed_from": replayed}
            return output
        if status == FAILED:
            raise RuntimeError(entry.get("error") or f"{self.label} failed in run {opened_by}.")
        if status == NEEDS_REVIEW:
            raise EffectNeedsReview(
                f"{self.label}, opened by run {opened_by}, is waiting for a person to resolve it; this run waits for "
                "that resolution too.", operation_id=self.call.operation_id, opened_by=opened_by,
            )
        raise EffectHeldElsewhere(self.call.operation_id, opened_by)

    async def attempt(self) -> Any:
        """Call the tool once more with the same operation id, recording the attempt first."""
        reason = await resolve(self.ledger.stopped_reason(tool_name=self.call.tool_name))
        if reason:
            await self.advance(self.entry["status"], via="stop", note=f"Not attempted: {reason}.")
            raise EffectsStopped(reason)
        self.ctx.deps.fault(FaultPoint.BEFORE_EFFECT)
        if self.ctx.signal is not None and self.ctx.signal.is_set():
            raise asyncio.CancelledError  # the leg is aborted: no new effect starts (the engine ends the leg so)
        # From the attempt's record on, the call and the record of its outcome run to their end whatever happens to
        # the leg meanwhile: a cancel (or a worker's shutdown) waits for them, so the ledger never says "attempted"
        # of a call that ended or of one that never started.
        return await _to_completion(self._attempt_recorded())

    async def _attempt_recorded(self) -> Any:
        # Recording the attempt is a fenced write, and the last one before the tool is called: a worker that
        # lost the run meanwhile (frozen, then taken over) is stopped here, not after calling the tool again.
        attempts = int(self.entry.get("attempts") or 0) + 1
        await self.advance(ATTEMPTED, via="tool", note=f"Attempt {attempts}.", attempts=attempts)
        self.call = replace(self.call, attempt=attempts)
        try:
            output = await self.tool.call_execute(self.call.input, replace(self.ctx, effect=self.call))
        except (OwnershipLostError, RunHalted, asyncio.CancelledError):
            raise
        except Exception as exc:
            if not self.spec.is_unknown_outcome(exc):
                message = redact(str(exc) or type(exc).__name__, self.ctx.deps.secrets)[:2000]
                await self.advance(FAILED, via="tool", note="The tool refused.", error=message)
                raise
            await self.advance(UNKNOWN, via="tool", note="The call ended without an outcome.",
                               error=self._redacted(exc))
            happened, found = await self.reconcile()
            if not happened:
                raise await self.needs_review(
                    "The call timed out and the outside system has no record of it yet", via="reconcile"
                ) from exc
            return await self.settled()
        self.ctx.deps.fault(FaultPoint.AFTER_EFFECT_COMMIT)
        await self.advance(COMMITTED, via="tool", note="The tool returned.", output=output, error="")
        self.ctx.deps.fault(FaultPoint.AFTER_EFFECT_RECORD)
        return await self.settled()


async def _to_completion(coroutine: Any) -> Any:
    """Await ``coroutine`` to its end even when the caller is cancelled meanwhile; that cancel is raised after it
    (its outcome, recorded by then, is not the caller's any more)."""
    task = asyncio.ensure_future(coroutine)
    interrupted = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            interrupted = interrupted or not task.done()
        except Exception:  # the task ended with it: raised below, unless the caller was cancelled meanwhile
            pass
    if interrupted:
        if not task.cancelled():
            task.exception()  # retrieved, so it is not reported as lost: the ledger holds the outcome
        raise asyncio.CancelledError
    return task.result()


def _operation_id(tool: Tool, tool_input: dict[str, Any], ctx: ToolContext) -> str:
    """The call's operation id: its business operation's when the tool names one, else its run's and call's."""
    operation_key = tool.effect.operation_key if tool.effect is not None else None
    if operation_key is None:
        return effect_operation_id(ctx.run_id, ctx.tool_call_id)
    key = operation_key(tool_input)
    if not isinstance(key, str) or not key:
        raise ValueError(f"The operation key of {ctx.tool_name} must be a non-empty string, not {key!r}.")
    return business_operation_id(ctx.tool_name, key)


async def perform_effect(tool: Tool, tool_input: dict[str, Any], ctx: ToolContext) -> Any:
    """Run an effectful tool's call through the ledger: at most one effect per operation id (module docstring)."""
    ledger = ctx.effect_ledger if ctx.effect_ledger is not None else InMemoryEffectLedger()
    tool_name = ctx.tool_name
    call = EffectCall(
        operation_id=_operation_id(tool, tool_input, ctx),
        run_id=ctx.run_id,
        tool_call_id=ctx.tool_call_id,
        tool_name=tool_name,
        input=tool_input,
        fingerprint=tool.fingerprint_of(tool_name, tool_input),
        epoch=int(getattr(ledger, "epoch", 0) or 0),
    )
    operation = _Operation(tool=tool, call=call, ctx=ctx, ledger=ledger)
    existing = await resolve(ledger.get(call.operation_id))
    if existing is None:
        await operation.authorize()  # a denied call leaves no entry
        existing = await resolve(ledger.open({
            "operation_id": call.operation_id, "run_id": call.run_id, "tool_call_id": call.tool_call_id,
            "tool_name": tool_name, "fingerprint": call.fingerprint, "input": tool_input,
        }))
    operation.entry = existing
    opened_by = operation.opened_by
    if opened_by is not None:
        return await operation.elsewhere(opened_by)
    if existing["fingerprint"] != call.fingerprint:
        await operation.advance(existing["status"], via="conflict", note="Refused: the same operation id with "
                                "another request.", evidence={"fingerprint": call.fingerprint})
        raise EffectConflictError(
            f"Operation {call.operation_id} was recorded for a different request; refusing to reuse it."
        )
    call = operation.call = replace(call, attempt=int(existing.get("attempts") or 0))
    status = existing["status"]
    if status in (COMMITTED, VERIFIED):
        return await operation.settled()  # replay: the effect happened already
    if status == FAILED:
        raise RuntimeError(existing.get("error") or f"{operation.label} failed earlier.")
    if status == NEEDS_REVIEW:
        raise EffectNeedsReview(f"{operation.label} is waiting for a person to resolve it.")
    if status in (ATTEMPTED, UNKNOWN):
        happened, _ = await operation.reconcile()  # a previous attempt may have happened: ask before acting
        if happened:
            return await operation.settled()
        if status == UNKNOWN:
            raise await operation.needs_review("The outcome is unknown and the outside system has no record of "
                                               "it yet", via="reconcile")
    await operation.authorize()
    return await operation.attempt()
