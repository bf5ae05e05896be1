"""Resuming a run from its latest checkpoint, buffered or streaming."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .engine import CallOptions, DurableSession, LegStart, run_leg
from .loops import emitting_errors, error_part, load_checkpoint
from .results import GenerateTextResult, StreamChatResult
from .stores import SessionStore
from .types import StreamPart

__all__ = ["resume_from_checkpoint", "resume_stream_from_checkpoint"]

_NOT_RESUME_OPTIONS = ("messages", "session")


async def resume_from_checkpoint(store: SessionStore, run_id: str, **options: Any) -> GenerateTextResult:
    """Continue ``run_id`` from its latest checkpoint; raises CheckpointNotFoundError for an unknown run."""
    call = _resume_call(store, run_id, options)
    checkpoint = await load_checkpoint(store, run_id)
    return await run_leg(call, LegStart.from_checkpoint(checkpoint))


def resume_stream_from_checkpoint(store: SessionStore, run_id: str, **options: Any) -> StreamChatResult:
    """The streaming twin: returns at once and never raises; failures are an error part and rejected awaitables."""
    try:
        call: CallOptions | None = _resume_call(store, run_id, options)
        bad_options: Exception | None = None
    except (TypeError, ValueError) as exc:
        call, bad_options = None, exc

    async def produce(emit: Callable[[StreamPart], None]) -> GenerateTextResult:
        if bad_options is not None:
            emit(error_part(bad_options))
            raise bad_options

        async def leg() -> GenerateTextResult:
            checkpoint = await load_checkpoint(store, run_id)
            return await run_leg(call, LegStart.from_checkpoint(checkpoint), emit)  # type: ignore[arg-type]

        return await emitting_errors(emit, call, leg())  # type: ignore[arg-type]

    return StreamChatResult(run_id=run_id, producer=produce)


def _resume_call(store: SessionStore, run_id: str, options: dict[str, Any]) -> CallOptions:
    for name in _NOT_RESUME_OPTIONS:
        if name in options:
            raise TypeError(f"A resume takes no {name!r}: the checkpoint supplies it.")
    return CallOptions(**options, session=DurableSession(store=store, run_id=run_id))
