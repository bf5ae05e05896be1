"""The OpenAI provider (and OpenAI-compatible servers), driven through the official SDK against recorded HTTP
responses; the Anthropic provider's are in test_providers.py.

Nothing reaches a real API: each SDK client gets an ``httpx2.MockTransport`` (provider_fakes.FakeAPI) that serves
recordings from ``provider_recordings`` and keeps every request it was sent.
"""

from __future__ import annotations

import base64
import json

import httpx2
import openai
import pytest

from runs.runtime import generate_text
from runs.runtime.providers import OpenAIChatModel, create_openai
from tests.runs.runtime import provider_recordings as rec
from tests.runs.runtime.provider_fakes import (
    OPENAI_KEY,
    PNG,
    TIME_CALL,
    WEATHER_CALL,
    WEATHER_SPEC,
    FakeAPI,
    Trickle,
    events_of,
    gpt,
    request,
    result,
    sse,
    weather_tools,
)


# ========================================================================= OpenAI: the response


async def test_openai_text_streams_as_deltas_then_finish_with_usage_from_the_last_chunk():
    events = await events_of(gpt(FakeAPI(rec.OPENAI_TEXT)))
    assert events == [
        {"type": "text-delta", "text": "Hello"},
        {"type": "text-delta", "text": "! How can I"},
        {"type": "text-delta", "text": " help you today?"},
        {"type": "finish", "usage": {"input_tokens": 19, "output_tokens": 10}, "finish_reason": "stop"},
    ]


async def test_openai_tool_call_deltas_are_assembled_by_index_into_tool_calls():
    events = await events_of(gpt(FakeAPI(rec.OPENAI_TOOL_CALLS)))
    assert events == [
        {
            "type": "tool-call",
            "tool_call_id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
            "tool_name": "get_weather",
            "input": {"city": "Paris", "unit": "celsius"},
        },
        {"type": "tool-call", "tool_call_id": "call_mVbv3BGkNvyj7qL8zWQkvgKR", "tool_name": "get_time", "input": {"timezone": "Asia/Tokyo"}},
        {"type": "finish", "usage": {"input_tokens": 142, "output_tokens": 52}, "finish_reason": "tool-calls"},
    ]


async def test_openai_text_deltas_leave_as_they_arrive():
    body = Trickle(rec.OPENAI_TEXT)
    model = gpt(FakeAPI(sse(body)))
    sent_at = [body.sent async for event in model.stream(request()) if event["type"] == "text-delta"]
    assert sent_at[0] == body.position('"Hello"')
    assert sent_at[0] < len(body.events)


# ========================================================================== OpenAI: the request


async def test_openai_request_streams_with_usage_included():
    api = FakeAPI(rec.OPENAI_TEXT)
    await events_of(gpt(api))
    body = api.bodies[0]
    assert (body["model"], body["stream"], body["stream_options"]) == ("gpt-4o", True, {"include_usage": True})
    assert api.requests[0].url.path == "/v1/chat/completions"


async def test_openai_system_prompt_and_system_messages_become_one_leading_system_message():
    api = FakeAPI(rec.OPENAI_TEXT)
    req = request(
        {"role": "user", "content": "Hi"},
        {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]},
        system="Be brief.",
    )
    await events_of(gpt(api), req)
    assert api.bodies[0]["messages"] == [
        {"role": "system", "content": "Be brief.\n\nAnswer in French."},
        {"role": "user", "content": "Hi"},
    ]


async def test_openai_assistant_tool_calls_carry_json_arguments():
    api = FakeAPI(rec.OPENAI_TEXT)
    req = request(
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, WEATHER_CALL]},
        {"role": "tool", "content": [result("toolu_1", "get_weather", "18C")]},
    )
    await events_of(gpt(api), req)
    assert api.bodies[0]["messages"][1] == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}],
    }


async def test_openai_each_tool_result_becomes_its_own_tool_message_with_string_content():
    api = FakeAPI(rec.OPENAI_TEXT)
    req = request(
        {"role": "user", "content": "Weather in Paris, time in Tokyo?"},
        {"role": "assistant", "content": [WEATHER_CALL, TIME_CALL]},
        {"role": "tool", "content": [result("toolu_1", "get_weather", {"temp_c": 18}), result("toolu_2", "get_time", "21:05")]},
    )
    await events_of(gpt(api), req)
    assert api.bodies[0]["messages"][1:] == [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
                {"id": "toolu_2", "type": "function", "function": {"name": "get_time", "arguments": '{"timezone": "Asia/Tokyo"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": '{"temp_c": 18}'},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "21:05"},
    ]


async def test_openai_images_are_sent_as_data_urls():
    api = FakeAPI(rec.OPENAI_TEXT)
    req = request({"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image", "data": PNG, "media_type": "image/png"}]})
    await events_of(gpt(api), req)
    assert api.bodies[0]["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}},
    ]


async def test_openai_tools_are_sent_as_functions_with_parameters():
    api = FakeAPI(rec.OPENAI_TEXT)
    await events_of(gpt(api), request(tools=[WEATHER_SPEC]))
    assert api.bodies[0]["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": WEATHER_SPEC["description"], "parameters": WEATHER_SPEC["input_schema"]},
        }
    ]


# =========================================================================== OpenAI: errors


async def test_openai_auth_error_raises_the_sdk_error_without_the_key():
    api = FakeAPI(httpx2.Response(401, json=rec.OPENAI_401_BODY))
    with pytest.raises(openai.AuthenticationError) as info:
        await events_of(gpt(api))
    assert info.value.status_code == 401
    assert OPENAI_KEY not in str(info.value)
    assert api.requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"


async def test_openai_error_that_echoes_the_key_is_scrubbed_of_it():
    body = {"error": {"message": f"Incorrect API key provided: {OPENAI_KEY}.", "type": "invalid_request_error", "code": "invalid_api_key"}}
    with pytest.raises(openai.AuthenticationError) as info:
        await events_of(gpt(FakeAPI(httpx2.Response(401, json=body))))
    assert OPENAI_KEY not in str(info.value)
    assert OPENAI_KEY not in json.dumps(info.value.body)


async def test_openai_server_error_raises_when_the_client_does_not_retry():
    api = FakeAPI(httpx2.Response(500, json=rec.OPENAI_500_BODY), rec.OPENAI_TEXT)
    with pytest.raises(openai.InternalServerError):
        await events_of(gpt(api))
    assert len(api.requests) == 1


# ======================================================================== OpenAI: end to end


async def test_generate_text_runs_a_tool_loop_on_openai():
    api = FakeAPI(rec.OPENAI_TOOL_CALLS, rec.OPENAI_FINAL)
    model = gpt(api, pricing={"input": 2.5e-6, "output": 10e-6})
    result_ = await generate_text(
        model=model, messages=[{"role": "user", "content": "Weather in Paris, time in Tokyo?"}], tools=weather_tools(), max_steps=3
    )
    assert (result_.text, result_.finish_reason) == ("It is 18°C in Paris and 21:05 in Tokyo.", "stop")
    assert api.bodies[1]["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "content": '{"city": "Paris", "temp_c": 18}'},
        {"role": "tool", "tool_call_id": "call_mVbv3BGkNvyj7qL8zWQkvgKR", "content": "21:05"},
    ]
    assert result_.usage["cost"] == pytest.approx((142 + 231) * 2.5e-6 + (52 + 14) * 10e-6)


# ===================================================================== OpenAI: construction


def test_create_openai_points_models_at_a_compatible_server():
    model = create_openai(api_key=OPENAI_KEY, base_url="http://localhost:8000/v1")("llama-3.1-8b")
    assert (model.model_id, model.client.api_key, str(model.client.base_url).rstrip("/")) == (
        "llama-3.1-8b",
        OPENAI_KEY,
        "http://localhost:8000/v1",
    )
