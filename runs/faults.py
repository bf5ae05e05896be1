"""Fault injection for crash tests: DEUZ_FAULT=POINT[:N] kills this process at the N-th time it reaches POINT."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

__all__ = ["POINTS", "fault_probe"]

POINTS = frozenset(
    {
        "after-model-decision",
        "before-effect",
        "after-effect-commit",
        "after-effect-record",
        "before-step-checkpoint",
        "after-step-checkpoint",
        "mid-stream",
        "after-suspend",
    }
)


def _no_fault(point: str) -> None:
    return None


def fault_probe(spec: str | None) -> Callable[[str], None]:
    """A probe for ``deps.fault``; without a spec it does nothing (and costs one call)."""
    if not spec:
        return _no_fault
    point, _, count = spec.partition(":")
    if point not in POINTS:
        raise ValueError(f"DEUZ_FAULT names an unknown point {point!r}; known: {', '.join(sorted(POINTS))}.")
    target = int(count or 1)
    seen = 0
    lock = threading.Lock()

    def probe(reached: str) -> None:
        nonlocal seen
        if reached != point:
            return
        with lock:
            seen += 1
            if seen == target:
                os.kill(os.getpid(), signal.SIGKILL)

    return probe
