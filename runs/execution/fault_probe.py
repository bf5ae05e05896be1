"""Fault injection for crash tests: DEUZ_FAULT=POINT[:N] kills this process at the N-th time it reaches POINT.

With DEUZ_FAULT_ACTION=stop the process freezes there instead (SIGSTOP, after a pause that lets work already in
flight on other threads commit, so it holds no lock): a stale worker a crash test wakes later with SIGCONT.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

from runs.runtime.faults import FaultPoint

__all__ = ["POINTS", "fault_probe", "fault_spec_error"]

POINTS = frozenset(FaultPoint)


def _no_fault(point: str) -> None:
    return None


def fault_spec_error(spec: str | None) -> str | None:
    """What is wrong with a DEUZ_FAULT value, or None when it is unset or valid (system check runs.E003)."""
    if not spec:
        return None
    point, _, count = spec.partition(":")
    if point not in POINTS:
        return f"DEUZ_FAULT names an unknown point {point!r}; known: {', '.join(sorted(POINTS))}."
    if count and (not count.isdigit() or int(count) < 1):
        return f"DEUZ_FAULT's count must be a whole number of at least 1, not {count!r}."
    return None


def fault_probe(spec: str | None) -> Callable[[str], None]:
    """A probe for ``deps.fault``; without a spec it does nothing (and costs one call)."""
    if not spec:
        return _no_fault
    error = fault_spec_error(spec)
    if error is not None:
        raise ValueError(error)
    point, _, count = spec.partition(":")
    target = int(count or 1)
    freeze = os.environ.get("DEUZ_FAULT_ACTION", "kill") == "stop"
    seen = 0
    lock = threading.Lock()

    def probe(reached: str) -> None:
        nonlocal seen
        if reached != point:
            return
        with lock:
            seen += 1
            if seen == target and freeze:
                time.sleep(0.3)  # the probe blocks its event loop: no new write starts, those in flight finish
                os.kill(os.getpid(), signal.SIGSTOP)
            elif seen == target:
                os.kill(os.getpid(), signal.SIGKILL)

    return probe
