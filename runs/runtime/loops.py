"""The public loops: generate_text (buffered) and stream_chat (streaming), one engine behind both."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from .engine import CallOptions, LegStart, run_leg
from .exceptions import CheckpointCorruptError, CheckpointNotFoundError, ModelCallError, RunError, StoreUnavailableError
from .redact import redact
from .results import GenerateTextResult, StreamChatResult
from .stores import SessionStore, resolve
from .types import AgentCheckpoint, StreamPart
from .usage import empty_usage

__all__ = ["emitting_errors", "error_part", "generate_text", "load_checkpoint", "stream_chat"]


async def generate_text(**options: Any) -> GenerateTextResult:
    """Run the agent loop to its end (final text, stop condition, suspension, abort) and return the result.

    Options: ``model``, ``messages``, ``tools``, ``max_steps`` (default 1), ``system``, ``session``,
    ``approval_responses``, ``approve_tool_call``, ``approval_signer``, ``approval_max_age_ms``,
    ``stop_when``, ``prepare_step``, ``max_tool_concurrency``, ``signal``, ``cancellation``, ``deps``.
    """
    call = _fresh_call(options)
    return await run_leg(call, await _fresh_start(call))


def stream_chat(**options: Any) -> StreamChatResult:
    """Start the agent loop and return at once; ``run_id`` is readable before the first part."""
    call = _fresh_call(options)

    async def produce(emit: Callable[[StreamPart], None]) -> GenerateTextResult:
        async def leg() -> GenerateTextResult:
            return await run_leg(call, await _fresh_start(call), emit)

        return await emitting_errors(emit, call, leg())

    return StreamChatResult(run_id=call.session.run_id if call.session else None, producer=produce)


def _fresh_call(options: dict[str, Any]) -> CallOptions:
    call = CallOptions(**options)
    if not isinstance(call.messages, list):
        raise TypeError("messages must be a list of message dicts.")
    for message in call.messages:
        if not isinstance(message, dict) or message.get("role") not in {"system", "user", "assistant", "tool"}:
            raise ValueError(f"Not a message: {message!r:.80}")
    if call.session is not None and call.session.run_id is None and call.tools:
        # Mint the id now, so stream_chat can hand it out before the first part.
        call = replace(call, session=replace(call.session, run_id=call.deps.generate_id()))  # type: ignore[union-attr]
    return call


async def _fresh_start(call: CallOptions) -> LegStart:
    """A fresh call; with a session whose run already has a checkpoint, counters continue from it."""
    session = call.session
    if session is None or not call.tools or session.run_id is None:
        return LegStart(messages=list(call.messages))
    try:
        previous = await resolve(session.store.load(session.run_id))
    except Exception as exc:  # durability is best effort for a call that brings its own history
        call.deps.logger.error(
            "Loading run %s failed (%s); its step counters restart.", session.run_id, type(exc).__name__
        )
        previous = None
    if previous is None:
        return LegStart(messages=list(call.messages))
    return LegStart(
        messages=list(call.messages),
        next_step_index=previous["step_index"] + 1,
        usage=dict(previous.get("usage") or empty_usage()),  # type: ignore[arg-type]
    )


async def load_checkpoint(store: SessionStore, run_id: str) -> AgentCheckpoint:
    """The run's latest checkpoint. A missing run and an unreachable store are different errors."""
    try:
        checkpoint = await resolve(store.load(run_id))
    except RunError:
        raise
    except Exception as exc:
        raise StoreUnavailableError(run_id, exc) from exc
    if checkpoint is None:
        raise CheckpointNotFoundError(run_id)
    if not isinstance(checkpoint, dict) or checkpoint.get("version") != 1:
        raise CheckpointCorruptError(f"The stored checkpoint of run {run_id!r} is not a version 1 AgentCheckpoint.")
    return checkpoint


def error_part(exc: BaseException, secrets: Iterable[str] = ()) -> StreamPart:
    """An ``error`` stream part; the message is redacted of secrets.

    ``retryable`` says whether a later leg may succeed (a transient model error, an unreachable store) and
    ``retry_after_ms`` is the provider's requested wait, when it named one.
    """
    if isinstance(exc, ModelCallError):
        return {
            "type": "error",
            "error": {"name": exc.error_name, "message": redact(exc.message, secrets)},
            "retryable": exc.is_transient,
            "retry_after_ms": exc.retry_after_ms,
        }
    return {
        "type": "error",
        "error": {"name": type(exc).__name__, "message": redact(str(exc), secrets)},
        "retryable": isinstance(exc, StoreUnavailableError),
        "retry_after_ms": None,
    }


async def emitting_errors(emit: Callable[[StreamPart], None], call: CallOptions, leg: Any) -> GenerateTextResult:
    try:
        return await leg
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        emit(error_part(exc, call.deps.secrets))  # type: ignore[union-attr]
        raise
