"""Real model providers: Anthropic Messages and OpenAI Chat Completions behind the runtime's model seam.

Importing this package imports neither SDK: each model imports its SDK when it first builds a client,
so ``import runs.runtime`` stays light and a project that uses one provider needs only that SDK.
"""

from __future__ import annotations

from .anthropic import AnthropicModel, create_anthropic
from .base import SdkModel, aclose_clients, is_local_base_url
from .openai import OpenAIChatModel, create_openai
from .pricing import PRICES, price_for

__all__ = [
    "PRICES",
    "AnthropicModel",
    "OpenAIChatModel",
    "SdkModel",
    "aclose_clients",
    "create_anthropic",
    "create_openai",
    "is_local_base_url",
    "price_for",
]
