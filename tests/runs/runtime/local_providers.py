"""The models and requests of the HTTP provider tests (test_provider_http.py, test_provider_http_openai.py):
each provider's model pointed at a LocalAPI (local_api.py), the tools the runs call, and the parts or the
classified error a run comes to. The fixtures that start the servers are in conftest.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from runs.runtime import tool
from runs.runtime.exceptions import ModelCallError
from runs.runtime.providers import AnthropicModel, OpenAIChatModel
from tests.runs.runtime.local_api import LocalAPI

ANTHROPIC_KEY = "sk-ant-api03-TESTONLY-9Lq2Vx7mWc3Rk8sPz1Yb6Nc3Hf5Jg0Tp"
OPENAI_KEY = "sk-proj-TESTONLY-7Hn2Qw8Ez6Rt1Yu9Io3Pa7Sd5Fg0Hjabcd"
EPHEMERAL = {"type": "ephemeral"}
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TIME_SCHEMA = {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}


def claude(api: LocalAPI, **options: Any) -> AnthropicModel:
    options.setdefault("api_key", ANTHROPIC_KEY)
    options.setdefault("max_retries", 0)
    return AnthropicModel("claude-sonnet-4-6", base_url=api.base_url, **options)


def gpt(api: LocalAPI, model_id: str = "gpt-4o", **options: Any) -> OpenAIChatModel:
    options.setdefault("api_key", OPENAI_KEY)
    options.setdefault("max_retries", 0)
    return OpenAIChatModel(model_id, base_url=f"{api.base_url}/v1", **options)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def weather_tools(ran: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    def get_weather(tool_input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        if ran is not None:
            ran.append(tool_input)
        return {"city": tool_input["city"], "temp_c": 18}

    return {
        "get_weather": tool(description="Current weather for a city.", input_schema=WEATHER_SCHEMA, execute=get_weather),
        "get_time": tool(description="The local time in a time zone.", input_schema=TIME_SCHEMA, execute=lambda i, ctx: "21:05"),
    }


async def parts_of(stream: Any) -> list[dict[str, Any]]:
    return [part async for part in stream.full_stream]


async def failure_of(coro: Any) -> ModelCallError:
    with pytest.raises(ModelCallError) as raised:
        await coro
    return raised.value
