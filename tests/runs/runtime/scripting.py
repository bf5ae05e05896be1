"""Helpers that write ScriptedModel scripts and stand in for the outside world in runtime tests."""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from runs.runtime import Deps, tool
from runs.runtime.durable import InMemorySessionStore


def says(text: str, *, input_tokens: int = 10, output_tokens: int = 5) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def calls(*tool_calls: dict[str, Any], text: str | None = None, input_tokens: int = 10, output_tokens: int = 5) -> dict[str, Any]:
    content = ([{"type": "text", "text": text}] if text else []) + list(tool_calls)
    return {"content": content, "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def call(tool_name: str, tool_call_id: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_call", "tool_name": tool_name, "tool_call_id": tool_call_id, "input": tool_input}


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


class FakeClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.value = now

    def now(self) -> int:
        return self.value

    def advance(self, ms: int) -> None:
        self.value += ms


class RecordingStore(InMemorySessionStore):
    """The reference store, also keeping every snapshot it was given, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[dict[str, Any]] = []

    def save(self, checkpoint: dict[str, Any]) -> None:
        self.saved.append(dict(checkpoint))
        super().save(checkpoint)

    def statuses(self, run_id: str) -> list[tuple[int, str]]:
        return [(cp["step_index"], cp["status"]) for cp in self.saved if cp["run_id"] == run_id]


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    @property
    def messages(self) -> list[str]:
        return [record.getMessage() for record in self.records]


def make_deps(*, clock: FakeClock | None = None, prefix: str = "id") -> tuple[Deps, ListHandler]:
    """Deps with a fake clock, sequential ids and a logger whose records a test can read."""
    counter = itertools.count(1)
    logger = logging.getLogger(f"deuz.test.{id(counter)}")
    logger.propagate = False
    handler = ListHandler()
    logger.addHandler(handler)
    deps = Deps(clock=clock or FakeClock(), generate_id=lambda: f"{prefix}-{next(counter)}", logger=logger)
    return deps, handler


class Counter:
    """A side-effecting tool that counts its executions."""

    def __init__(self) -> None:
        self.inputs: list[dict[str, Any]] = []

    def __call__(self, tool_input: dict[str, Any], ctx: Any) -> str:
        self.inputs.append(dict(tool_input))
        return f"done {len(self.inputs)}"

    @property
    def count(self) -> int:
        return len(self.inputs)


def counting_tool(counter: Counter, **options: Any):
    return tool(description="A side effect.", execute=counter, **options)


class Crash(BaseException):
    """Stands in for the process dying: nothing in the loop may catch it."""


async def collect(stream: Any) -> list[dict[str, Any]]:
    return [part async for part in stream]


def types(parts: list[dict[str, Any]]) -> list[str]:
    return [part["type"] for part in parts]


async def never() -> None:
    await asyncio.Event().wait()
