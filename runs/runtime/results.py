"""What the loops return: GenerateTextResult, and StreamChatResult with its live part log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from .types import Message, StreamPart, ToolApprovalRequest, Usage

__all__ = ["GenerateTextResult", "StepResult", "StreamChatResult"]


@dataclass(frozen=True)
class StepResult:
    step_index: int
    text: str
    tool_calls: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]
    usage: Usage
    #: Why the model call ended: ``stop``, ``tool-calls``, ``length``, ``content-filter`` or ``other``.
    finish_reason: str = "stop"


@dataclass(frozen=True)
class GenerateTextResult:
    text: str
    messages: list[Message]  # the full history
    response_messages: list[Message]  # what this call added
    steps: list[StepResult]
    usage: Usage  # this call's (leg's) own usage
    total_usage: Usage  # the whole run's cumulative usage
    finish_reason: str
    pending_approvals: list[ToolApprovalRequest] = field(default_factory=list)
    run_id: str | None = None


Producer = Callable[[Callable[[StreamPart], None]], Awaitable[GenerateTextResult]]


class _Outcome:
    """An awaitable view of the finished run, awaitable any number of times."""

    def __init__(self, owner: StreamChatResult, pick: Callable[[GenerateTextResult], Any]) -> None:
        self._owner = owner
        self._pick = pick

    def __await__(self) -> Generator[Any, None, Any]:
        return self._resolve().__await__()

    async def _resolve(self) -> Any:
        return self._pick(await self._owner._finished())


class _Failure:
    """An awaitable of the call's exception (None when it succeeded), awaitable any number of times."""

    def __init__(self, owner: StreamChatResult) -> None:
        self._owner = owner

    def __await__(self) -> Generator[Any, None, BaseException | None]:
        return self._resolve().__await__()

    async def _resolve(self) -> BaseException | None:
        self._owner._start()
        await self._owner._wait_done()
        return self._owner._error


class _PartReader:
    """One read of the part log; ``full_stream`` and ``text_stream`` are each readable once."""

    def __init__(self, owner: StreamChatResult, text_only: bool) -> None:
        self._owner = owner
        self._text_only = text_only
        self._taken = False

    def __aiter__(self) -> AsyncIterator[Any]:
        if self._taken:
            raise RuntimeError("This stream has already been read; each stream is readable once.")
        self._taken = True
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        index = 0
        async for part in self._owner._parts_from(index):
            if not self._text_only:
                yield part
            elif part["type"] == "text-delta":
                yield part["text"]


class StreamChatResult:
    """A streaming call. The producer starts as soon as an event loop runs it and drains into its part
    log whether or not anyone reads (a closed browser tab never stalls a run)."""

    def __init__(self, *, run_id: str | None, producer: Producer) -> None:
        self.run_id = run_id
        self._producer = producer
        self._parts: list[StreamPart] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._done = False
        self._result: GenerateTextResult | None = None
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self.full_stream = _PartReader(self, text_only=False)
        self.text_stream = _PartReader(self, text_only=True)
        self.usage = _Outcome(self, lambda result: result.usage)
        self.finish_reason = _Outcome(self, lambda result: result.finish_reason)
        self.pending_approvals = _Outcome(self, lambda result: result.pending_approvals)
        self.result = _Outcome(self, lambda result: result)
        #: Awaitable: the exception the call failed with (a ``ModelCallError`` for a model's failure, with
        #: ``is_transient`` and ``retry_after_ms``), or None when it ended normally. Never raises.
        self.error = _Failure(self)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: start on first use
        self._start()

    async def consume(self) -> None:
        """Drain the run with no reader; errors stay on the parts and the awaitables."""
        self._start()
        await self._wait_done()

    @property
    def parts(self) -> list[StreamPart]:
        """Every part emitted so far (a copy)."""
        return list(self._parts)

    def parts_from(self, index: int) -> list[StreamPart]:
        """The parts emitted from position ``index`` on (a journal writer keeps its own position)."""
        return self._parts[index:]

    def parts_count(self) -> int:
        return len(self._parts)

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._produce())

    async def _produce(self) -> None:
        try:
            self._result = await self._producer(self._emit)
        except asyncio.CancelledError as exc:
            self._error = exc
            raise
        except BaseException as exc:  # surfaced through the awaitables; the error part was emitted
            self._error = exc
        finally:
            self._done = True
            self._wake()

    def _emit(self, part: StreamPart) -> None:
        self._parts.append(part)
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _wait_change(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    async def _wait_done(self) -> None:
        while not self._done:
            await self._wait_change()

    async def _parts_from(self, index: int) -> AsyncIterator[StreamPart]:
        self._start()
        while True:
            while index < len(self._parts):
                yield self._parts[index]
                index += 1
            if self._done:
                return
            await self._wait_change()

    async def _finished(self) -> GenerateTextResult:
        self._start()
        await self._wait_done()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result
