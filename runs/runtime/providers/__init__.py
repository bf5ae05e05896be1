"""Real model providers: Anthropic Messages and OpenAI Chat Completions behind the runtime's model seam.

Importing this package imports neither SDK: each model imports its SDK when it first builds a client,
so ``import runs.runtime`` stays light and a project that uses one provider needs only that SDK.
"""

from __future__ import annotations

from .anthropic import AnthropicModel, create_anthropic
from .openai import OpenAIChatModel, create_openai

__all__ = ["AnthropicModel", "OpenAIChatModel", "create_anthropic", "create_openai"]
