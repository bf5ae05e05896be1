"""Latency summaries of the fleet benchmarks: percentiles of a list of milliseconds (pure, no Django)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["percentile", "summary"]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by the nearest-rank method: the smallest value with at least q% of the
    values at or below it. With 50 values p99 is the largest, so a single slow one shows."""
    if not values:
        raise ValueError("No values to take a percentile of.")
    if not 0 <= q <= 100:
        raise ValueError(f"A percentile is between 0 and 100, not {q}.")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    """Count, p50, p99, max and mean; all zero for no values (a part that measured nothing says so by its n)."""
    if not values:
        return {"n": 0, "p50": 0.0, "p99": 0.0, "max": 0.0, "mean": 0.0}
    return {"n": len(values), "p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values),
            "mean": statistics.fmean(values)}
