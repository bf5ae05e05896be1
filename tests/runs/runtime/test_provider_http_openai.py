"""The OpenAI provider (and OpenAI-compatible servers: Ollama, vLLM) against a local HTTP server speaking its
streaming format (``local_api.LocalAPI``); the Anthropic provider's are in test_provider_http.py.

Each test asserts what went over the socket (headers, body: limits, stream options) and what the runtime made
of the answer (model events, stream parts, results, classified errors).
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from runs.runtime import generate_text, tool
from runs.runtime.providers import OpenAIChatModel
from runs.runtime.providers.openai import TOOL_ERROR_PREFIX
from tests.runs.runtime import provider_recordings as rec
from tests.runs.runtime.local_api import JSONReply, SSEReply
from tests.runs.runtime.local_providers import (
    OPENAI_KEY,
    TIME_SCHEMA,
    failure_of,
    gpt,
    user,
    weather_tools,
)

pytestmark = pytest.mark.usefixtures("no_provider_environment")


# ============================================================================= OpenAI: the request


async def test_openai_request_streams_with_usage_and_no_output_limit_unless_set(serve):
    api = serve(rec.OPENAI_TEXT)
    await generate_text(model=gpt(api), messages=user("Hi"))
    sent = api.requests[0]
    assert (sent.path, sent.headers["authorization"]) == ("/v1/chat/completions", f"Bearer {OPENAI_KEY}")
    assert sent.body == {
        "model": "gpt-4o",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "Hi"}],
    }


async def test_openai_stream_options_can_be_switched_off_and_no_usage_chunk_is_fine(serve):
    api = serve(rec.NO_USAGE_TEXT)
    result = await generate_text(model=gpt(api, "local-model", include_usage=False), messages=user("Hi"))
    assert "stream_options" not in api.bodies[0]
    assert (result.text, result.usage) == ("Hello from a local server.", {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})


async def test_openai_model_options_reach_the_request(serve):
    api = serve(rec.OPENAI_TEXT)
    model = gpt(
        api,
        max_tokens=256,
        temperature=0.0,
        tool_choice={"tool_name": "get_weather"},
        extra_headers={"X-Request-Source": "deuz-tests"},
        extra_body={"top_k": 20},
    )
    await generate_text(model=model, messages=user("Hi"), tools=weather_tools())
    sent = api.requests[0]
    assert (sent.body["max_tokens"], sent.body["temperature"], sent.body["top_k"]) == (256, 0.0, 20)
    assert sent.body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent.headers["x-request-source"] == "deuz-tests"


async def test_openai_itself_gets_max_completion_tokens():
    import httpx2

    bodies: list[dict[str, Any]] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=rec.OPENAI_TEXT.encode())

    client = openai.AsyncOpenAI(api_key=OPENAI_KEY, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)))
    await generate_text(model=OpenAIChatModel("gpt-4o", client=client, max_tokens=256), messages=user("Hi"))
    assert (bodies[0]["max_completion_tokens"], "max_tokens" in bodies[0]) == (256, False)


async def test_a_local_openai_compatible_server_needs_no_key_and_gets_no_authorization(serve):
    api = serve(rec.NO_USAGE_TEXT)
    result = await generate_text(model=gpt(api, "llama3.1:8b", api_key=None), messages=user("Hi"))
    assert result.text == "Hello from a local server."
    assert "authorization" not in api.requests[0].headers


async def test_an_error_tool_result_reaches_openai_marked_as_an_error(serve):
    api = serve(rec.OPENAI_TOOL_CALLS, rec.OPENAI_FINAL)
    tools = {**weather_tools(), "get_time": tool(input_schema=TIME_SCHEMA, execute=lambda i, ctx: 1 / 0)}
    await generate_text(model=gpt(api), messages=user("Go"), tools=tools, max_steps=2)
    assert api.bodies[1]["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "content": '{"city": "Paris", "temp_c": 18}'},
        {"role": "tool", "tool_call_id": "call_mVbv3BGkNvyj7qL8zWQkvgKR", "content": TOOL_ERROR_PREFIX + "division by zero"},
    ]


# ========================================================================= OpenAI: stop reasons


async def test_openai_length_and_content_filter_are_finish_reasons(serve):
    api = serve(rec.OPENAI_LENGTH_TEXT, rec.OPENAI_CONTENT_FILTER)
    cut = await generate_text(model=gpt(api), messages=user("Tell me a story"))
    filtered = await generate_text(model=gpt(api), messages=user("Something harmful"))
    assert (cut.finish_reason, filtered.finish_reason) == ("length", "content-filter")


async def test_a_tool_call_cut_off_at_the_openai_output_limit_is_an_error_result(serve):
    api = serve(rec.OPENAI_TOOL_CALL_CUT_OFF, rec.OPENAI_FINAL)
    ran: list[dict[str, Any]] = []
    result = await generate_text(model=gpt(api, max_tokens=16), messages=user("Weather?"), tools=weather_tools(ran), max_steps=2)
    [error] = result.steps[0].tool_results
    assert (error["is_error"], ran, result.steps[0].finish_reason) == (True, [], "length")
    assert error["output"].startswith("The tool call's input was cut off at the output limit (max_tokens=16)")
    assert api.bodies[1]["messages"][-1] == {
        "role": "tool", "tool_call_id": "call_CutOff9pD3xa9XTPNJ32zg2h", "content": TOOL_ERROR_PREFIX + error["output"],
    }


async def test_malformed_tool_arguments_from_a_local_model_go_back_as_an_error(serve):
    api = serve(rec.OPENAI_TOOL_CALL_MALFORMED, rec.OPENAI_FINAL)
    ran: list[dict[str, Any]] = []
    result = await generate_text(model=gpt(api, "qwen2.5:7b"), messages=user("Weather?"), tools=weather_tools(ran), max_steps=2)
    [error] = result.steps[0].tool_results
    assert (error["is_error"], ran, result.finish_reason) == (True, [], "stop")
    assert error["output"].startswith("The tool call's input is not valid JSON (")
    assert api.bodies[1]["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{}"


# =================================================================== OpenAI: compatible servers


async def test_ollama_parallel_calls_on_one_index_stay_two_calls(serve):
    api = serve(rec.OLLAMA_PARALLEL_SAME_INDEX, rec.OPENAI_FINAL)
    result = await generate_text(model=gpt(api, "llama3.1:8b"), messages=user("Go"), tools=weather_tools(), max_steps=2)
    assert [(call["tool_call_id"], call["tool_name"], call["input"]) for call in result.steps[0].tool_calls] == [
        ("call_w1k3xq9d", "get_weather", {"city": "Paris"}),
        ("call_t7m2vz4p", "get_time", {"timezone": "Asia/Tokyo"}),
    ]
    assert result.steps[0].finish_reason == "tool-calls"  # Ollama says "stop"; the calls say otherwise


async def test_tool_call_deltas_without_an_index_continue_the_latest_call_until_a_new_id(serve):
    api = serve(rec.NO_INDEX_TOOL_CALLS, rec.OPENAI_FINAL)
    result = await generate_text(model=gpt(api, "local-model"), messages=user("Go"), tools=weather_tools(), max_steps=2)
    assert [(call["tool_call_id"], call["input"]) for call in result.steps[0].tool_calls] == [
        ("call_a", {"city": "Paris"}),
        ("call_b", {"timezone": "Asia/Tokyo"}),
    ]


async def test_openai_cached_tokens_are_priced_at_the_cached_rate(serve):
    api = serve(rec.OPENAI_CACHED_TEXT)
    result = await generate_text(model=gpt(api), messages=user("Hi"))
    assert (result.usage["input_tokens"], result.usage["cache_read_tokens"], "cache_write_tokens" in result.usage) == (2048, 1536, False)
    assert result.usage["cost"] == pytest.approx(((2048 - 1536) * 2.50 + 1536 * 1.25 + 10 * 10.0) / 1e6)


# ============================================================================== OpenAI: errors


@pytest.mark.parametrize(
    ("reply", "name", "transient", "reason", "retry_after_ms"),
    [
        (JSONReply(429, rec.OPENAI_429_BODY, headers={"retry-after-ms": "1200"}), "RateLimitError", True, "rate-limit", 1200),
        (JSONReply(503, rec.OPENAI_500_BODY), "InternalServerError", True, "overloaded", None),
        (JSONReply(401, rec.OPENAI_401_BODY), "AuthenticationError", False, "auth", None),
        (JSONReply(400, rec.OPENAI_400_BODY), "BadRequestError", False, "bad-request", None),
        (JSONReply(429, rec.OPENAI_429_BODY, headers={"x-should-retry": "false"}), "RateLimitError", False, "rate-limit", None),
    ],
)
async def test_openai_http_errors_are_classified_for_retries(serve, reply, name, transient, reason, retry_after_ms):
    api = serve(reply)
    error = await failure_of(generate_text(model=gpt(api), messages=user("Hi")))
    assert (error.error_name, error.is_transient, error.reason, error.retry_after_ms) == (name, transient, reason, retry_after_ms)


async def test_an_openai_stream_cut_is_a_transient_stream_cut(serve):
    api = serve(SSEReply(rec.OPENAI_TEXT, cut_after=2))
    error = await failure_of(generate_text(model=gpt(api), messages=user("Hi")))
    assert (error.error_name, error.is_transient, error.reason) == ("APIConnectionError", True, "stream-cut")


async def test_an_error_object_inside_a_compatible_servers_stream_is_transient(serve):
    api = serve(rec.OPENAI_ERROR_MID_STREAM)
    error = await failure_of(generate_text(model=gpt(api, "meta-llama/Llama-3.1-8B-Instruct"), messages=user("Hi")))
    assert (error.error_name, error.is_transient, error.reason) == ("APIError", True, "server")

