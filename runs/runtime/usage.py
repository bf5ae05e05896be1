"""Token and cost accounting.

``input_tokens`` counts every prompt token, cached or not; ``cache_read_tokens`` and ``cache_write_tokens``
(present only when a model reported some) say how many of them were read from or written to the provider's
prompt cache, so a cost can price them at the cache rates. All keys add up across steps and legs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .types import Usage

__all__ = ["CACHE_KEYS", "add_usage", "empty_usage", "normalize_usage", "total_tokens_of", "usage_cost"]

#: The optional usage keys of prompt caching, kept only when non-zero.
CACHE_KEYS = ("cache_read_tokens", "cache_write_tokens")


def empty_usage() -> Usage:
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}


def normalize_usage(raw: Mapping[str, Any] | None, *, pricing: Mapping[str, float] | None = None) -> Usage:
    """A model's raw usage as a full Usage, with ``cost`` when it is given or the price is known."""
    raw = raw or {}
    input_tokens = int(raw.get("input_tokens") or 0)
    output_tokens = int(raw.get("output_tokens") or 0)
    usage: Usage = {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": int(raw.get("total_tokens") or input_tokens + output_tokens),
    }
    for key in CACHE_KEYS:
        if raw.get(key):
            usage[key] = int(raw[key])  # type: ignore[literal-required]
    if raw.get("cost") is not None:
        usage["cost"] = float(raw["cost"])
    elif pricing:
        usage["cost"] = usage_cost(usage, pricing)
    return usage


def usage_cost(usage: Mapping[str, Any], pricing: Mapping[str, float]) -> float:
    """What ``usage`` costs at ``pricing`` (per token: ``input``, ``output``, and optionally ``cache_read``,
    ``cache_write``, which default to the input price)."""
    input_price = float(pricing.get("input", 0.0))
    read = int(usage.get("cache_read_tokens") or 0)
    write = int(usage.get("cache_write_tokens") or 0)
    fresh = max(0, int(usage.get("input_tokens") or 0) - read - write)
    return (
        fresh * input_price
        + read * float(pricing.get("cache_read", input_price))
        + write * float(pricing.get("cache_write", input_price))
        + int(usage.get("output_tokens") or 0) * float(pricing.get("output", 0.0))
    )


def add_usage(a: Mapping[str, Any], b: Mapping[str, Any]) -> Usage:
    total: Usage = {
        "input_tokens": a.get("input_tokens", 0) + b.get("input_tokens", 0),
        "output_tokens": a.get("output_tokens", 0) + b.get("output_tokens", 0),
        "total_tokens": a.get("total_tokens", 0) + b.get("total_tokens", 0),
    }
    for key in CACHE_KEYS:
        if key in a or key in b:
            total[key] = a.get(key, 0) + b.get(key, 0)  # type: ignore[literal-required]
    if "cost" in a or "cost" in b:
        total["cost"] = float(a.get("cost", 0.0)) + float(b.get("cost", 0.0))
    return total


def total_tokens_of(usage: Mapping[str, Any] | None) -> int:
    """The total tokens of a stored usage (a run's, a leg's), 0 when it has none."""
    return int((usage or {}).get("total_tokens", 0))
