"""Stop conditions for ``stop_when``; they see the whole run, across legs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .types import Usage

__all__ = ["StopContext", "StopCondition", "cost_exceeds", "step_count_is", "total_tokens_exceed"]


@dataclass(frozen=True)
class StopContext:
    step_count: int  # steps completed in the whole run
    usage: Usage  # cumulative usage of the whole run
    messages: list[dict[str, Any]]


StopCondition = Callable[[StopContext], bool]


def step_count_is(n: int) -> StopCondition:
    """Stop once the run has completed ``n`` steps."""
    return lambda ctx: ctx.step_count >= n


def total_tokens_exceed(n: int) -> StopCondition:
    """Stop once the run's cumulative tokens exceed ``n``."""
    return lambda ctx: ctx.usage.get("total_tokens", 0) > n


def cost_exceeds(amount: float) -> StopCondition:
    """Stop once the run's cumulative cost exceeds ``amount``."""
    return lambda ctx: float(ctx.usage.get("cost", 0.0)) > amount
