"""How fast this machine ran during a bench: a fixed pure-Python loop, timed at the start and at the end.

Shared machines (these are VMs with two vCPUs on a busy host) change speed by a quarter within a minute, so an
absolute bar can be missed on a slow stretch and met on a fast one with the same code. The probe's time, printed
beside the tables and kept in the results file, says which stretch a run measured: lower is faster.
"""

from __future__ import annotations

import time

__all__ = ["PROBE_LOOPS", "cpu_probe_ms", "probe_line"]

#: Iterations of the probe's loop (about 0.1 s on this project's CI machines).
PROBE_LOOPS = 2_000_000


def cpu_probe_ms(*, repeats: int = 5) -> float:
    """The fastest of ``repeats`` runs of the fixed loop, in milliseconds."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for index in range(PROBE_LOOPS):
            total += index * index
        best = min(best, (time.perf_counter() - started) * 1000)
    return best


def probe_line(start_ms: float, end_ms: float) -> str:
    """The printed word on the machine's speed during a run."""
    return (f"Machine speed: a fixed Python loop ({PROBE_LOOPS:,} iterations, fastest of 5) took {start_ms:.0f} ms "
            f"at the start and {end_ms:.0f} ms at the end (lower is faster; the same code's figures move with it).")
