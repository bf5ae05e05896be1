"""Token and cost accounting."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .types import Usage

__all__ = ["add_usage", "empty_usage", "normalize_usage"]


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
    if raw.get("cost") is not None:
        usage["cost"] = float(raw["cost"])
    elif pricing:
        usage["cost"] = input_tokens * float(pricing.get("input", 0.0)) + output_tokens * float(
            pricing.get("output", 0.0)
        )
    return usage


def add_usage(a: Mapping[str, Any], b: Mapping[str, Any]) -> Usage:
    total: Usage = {
        "input_tokens": a.get("input_tokens", 0) + b.get("input_tokens", 0),
        "output_tokens": a.get("output_tokens", 0) + b.get("output_tokens", 0),
        "total_tokens": a.get("total_tokens", 0) + b.get("total_tokens", 0),
    }
    if "cost" in a or "cost" in b:
        total["cost"] = float(a.get("cost", 0.0)) + float(b.get("cost", 0.0))
    return total
