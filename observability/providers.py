"""How a model's provider is named (as OpenTelemetry's gen_ai.provider.name), by the class of the model."""

from __future__ import annotations

__all__ = ["PROVIDERS", "model_provider_name"]

#: The runtime's model classes (runs.runtime.providers, runs.runtime.testing) and their providers' names.
PROVIDERS = {"AnthropicModel": "anthropic", "OpenAIChatModel": "openai", "ScriptedModel": "deuz.scripted"}


def model_provider_name(model: object) -> str:
    """The provider of ``model``; a model class of the deployer's own is named by its class."""
    return PROVIDERS.get(type(model).__name__, type(model).__name__)
