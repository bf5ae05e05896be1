"""The fake APIs of the provider tests (test_providers.py, test_providers_openai.py): an ``httpx2.MockTransport``
handler (the SDKs are built on httpx2) that serves recordings from ``provider_recordings`` and keeps every request
it was sent, the SDK clients and models on it, and the requests, tools and results the tests send.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import openai

from runs.runtime import tool
from runs.runtime.providers import AnthropicModel, OpenAIChatModel

ANTHROPIC_KEY = "sk-ant-api03-TESTONLY-7dq2Lx9vQm4Rk8sWz1Yb6Nc3Hf5Jg0Tp"
OPENAI_KEY = "sk-proj-TESTONLY-c4Vn8Qw2Ez6Rt1Yu9Io3Pa7Sd5Fg0Hjwxyz"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"


class FakeAPI:
    """A MockTransport handler: answers each request with the next recording and keeps the requests."""

    def __init__(self, *responses: str | httpx2.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        assert self.responses, f"no recording left for request {len(self.requests)}"
        response = self.responses.pop(0)
        return sse(response) if isinstance(response, str) else response

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(request.content) for request in self.requests]


def sse(body: str | AsyncIterator[bytes]) -> httpx2.Response:
    content = body.encode() if isinstance(body, str) else body
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=content)


class Trickle:
    """A response body sent one SSE event at a time, counting the events gone out so far."""

    def __init__(self, recording: str) -> None:
        self.events = [event + "\n\n" for event in recording.split("\n\n") if event.strip()]
        self.sent = 0

    def position(self, marker: str) -> int:
        """How many events are out once the first event containing ``marker`` is."""
        return next(i for i, event in enumerate(self.events) if marker in event) + 1

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for event in self.events:
            self.sent += 1
            yield event.encode()


def anthropic_client(api: FakeAPI, *, max_retries: int = 0) -> anthropic.AsyncAnthropic:
    transport = httpx2.MockTransport(api)
    return anthropic.AsyncAnthropic(api_key=ANTHROPIC_KEY, max_retries=max_retries, http_client=httpx2.AsyncClient(transport=transport))


def openai_client(api: FakeAPI, *, max_retries: int = 0) -> openai.AsyncOpenAI:
    transport = httpx2.MockTransport(api)
    return openai.AsyncOpenAI(api_key=OPENAI_KEY, max_retries=max_retries, http_client=httpx2.AsyncClient(transport=transport))


def claude(api: FakeAPI, **options: Any) -> AnthropicModel:
    # These tests read the message mapping; prompt caching's markers have their own tests (test_provider_http).
    options.setdefault("prompt_caching", False)
    return AnthropicModel("claude-sonnet-4-6", client=anthropic_client(api), **options)


def gpt(api: FakeAPI, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o", client=openai_client(api), **options)


def request(*messages: dict[str, Any], system: str | None = None, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"messages": list(messages) or [{"role": "user", "content": "Hi"}], "tools": tools or [], "system": system}


async def events_of(model: Any, req: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The model's events, without the running ``usage`` events (test_provider_http covers those)."""
    return [event async for event in model.stream(req or request()) if event["type"] != "usage"]


WEATHER_SPEC = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
}
TIME_SPEC = {
    "name": "get_time",
    "description": "The local time in a time zone.",
    "input_schema": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
}
WEATHER_CALL = {"type": "tool_call", "tool_call_id": "toolu_1", "tool_name": "get_weather", "input": {"city": "Paris"}}
TIME_CALL = {"type": "tool_call", "tool_call_id": "toolu_2", "tool_name": "get_time", "input": {"timezone": "Asia/Tokyo"}}


def result(call_id: str, name: str, output: Any, *, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_call_id": call_id, "tool_name": name, "output": output, "is_error": is_error}


def weather_tools() -> dict[str, Any]:
    return {
        "get_weather": tool(
            description=WEATHER_SPEC["description"],
            input_schema=WEATHER_SPEC["input_schema"],
            execute=lambda i, ctx: {"city": i["city"], "temp_c": 18},
        ),
        "get_time": tool(description=TIME_SPEC["description"], input_schema=TIME_SPEC["input_schema"], execute=lambda i, ctx: "21:05"),
    }

