"""List prices of well-known models, so usage carries a ``cost`` and ``cost_exceeds`` works out of the box.

Prices are US dollars per million tokens at the providers' standard rates (Anthropic's 5-minute cache
writes, prompts under 200k tokens; no batch or priority discounts). A model not listed gets no ``cost``;
pass ``pricing=`` to a model to price it, or to correct this table when a provider changes its prices.
"""

from __future__ import annotations

import re

__all__ = ["PRICES", "price_for"]

# model id (or family) -> (input, output, cache write, cache read), dollars per million tokens.
PRICES: dict[str, tuple[float, float, float, float]] = {
    # Anthropic: cache writes cost 1.25x input, cache reads 0.1x.
    "claude-opus-4-5": (5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-1": (15.0, 75.0, 18.75, 1.50),
    "claude-opus-4-0": (15.0, 75.0, 18.75, 1.50),
    "claude-opus-4-20250514": (15.0, 75.0, 18.75, 1.50),
    "claude-sonnet-4": (3.0, 15.0, 3.75, 0.30),
    "claude-3-7-sonnet": (3.0, 15.0, 3.75, 0.30),
    "claude-3-5-sonnet": (3.0, 15.0, 3.75, 0.30),
    "claude-haiku-4-5": (1.0, 5.0, 1.25, 0.10),
    "claude-3-5-haiku": (0.80, 4.0, 1.0, 0.08),
    "claude-3-haiku": (0.25, 1.25, 0.30, 0.03),
    "claude-3-opus": (15.0, 75.0, 18.75, 1.50),
    # OpenAI: caching is automatic; writes cost the input price, cached reads are discounted.
    "gpt-5": (1.25, 10.0, 1.25, 0.125),
    "gpt-5.1": (1.25, 10.0, 1.25, 0.125),
    "gpt-5-mini": (0.25, 2.0, 0.25, 0.025),
    "gpt-5-nano": (0.05, 0.40, 0.05, 0.005),
    "gpt-4.1": (2.0, 8.0, 2.0, 0.50),
    "gpt-4.1-mini": (0.40, 1.60, 0.40, 0.10),
    "gpt-4.1-nano": (0.10, 0.40, 0.10, 0.025),
    "gpt-4o": (2.50, 10.0, 2.50, 1.25),
    "gpt-4o-mini": (0.15, 0.60, 0.15, 0.075),
    "o1": (15.0, 60.0, 15.0, 7.50),
    "o3": (2.0, 8.0, 2.0, 0.50),
    "o3-mini": (1.10, 4.40, 1.10, 0.55),
    "o4-mini": (1.10, 4.40, 1.10, 0.275),
}

# What may follow a listed id and still name the same model: a version or a date (-4-6, -20250929, -2024-08-06, -latest).
_VERSION_SUFFIX = re.compile(r"(-\d+)*(-latest)?")


def price_for(model_id: str) -> dict[str, float] | None:
    """The per-token pricing of ``model_id`` (``input``, ``output``, ``cache_write``, ``cache_read``), or None.

    The longest listed id that ``model_id`` equals or extends with a version or date suffix wins, so
    ``claude-sonnet-4-5-20250929`` is priced as ``claude-sonnet-4`` and ``gpt-4o-mini`` not as ``gpt-4o``.
    """
    best = None
    for listed in PRICES:
        if model_id.startswith(listed) and _VERSION_SUFFIX.fullmatch(model_id[len(listed):]):
            if best is None or len(listed) > len(best):
                best = listed
    if best is None:
        return None
    input_price, output_price, write_price, read_price = PRICES[best]
    return {
        "input": input_price / 1e6,
        "output": output_price / 1e6,
        "cache_write": write_price / 1e6,
        "cache_read": read_price / 1e6,
    }
