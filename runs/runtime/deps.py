"""Injectable world: clock, id generator, logger, fault probe."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Clock", "Deps", "SystemClock"]


class Clock(Protocol):
    def now(self) -> int:
        """Milliseconds since the epoch."""


class SystemClock:
    """The wall clock in integer milliseconds."""

    def now(self) -> int:
        return time.time_ns() // 1_000_000


def _generate_id() -> str:
    return uuid.uuid4().hex


def _no_fault(point: str) -> None:
    return None


@dataclass(frozen=True, kw_only=True)
class Deps:
    """What the loops need from the outside world; pass fakes in tests."""

    clock: Clock = field(default_factory=SystemClock)
    generate_id: Callable[[], str] = _generate_id
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("deuz.runtime"))
    #: Called at named crash points (``after-model-decision``, ...); the service's fault injection hooks in here.
    fault: Callable[[str], None] = _no_fault
    #: Literal secret values to strip from error messages, on top of the built-in patterns.
    secrets: tuple[str, ...] = ()
