"""The Anthropic provider (and what both providers share), driven through the official SDK against recorded HTTP
responses; the OpenAI provider's tests are in test_providers_openai.py.

Nothing reaches a real API: each SDK client gets an ``httpx2.MockTransport`` (provider_fakes.FakeAPI) that serves
recordings from ``provider_recordings`` and keeps every request it was sent.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from typing import Any

import anthropic
import httpx2
import pytest

from runs.runtime import generate_text
from runs.runtime.providers import AnthropicModel, OpenAIChatModel, create_anthropic
from tests.runs.runtime import provider_recordings as rec
from tests.environment import REPO_ROOT
from tests.runs.runtime.provider_fakes import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
    PDF,
    PNG,
    TIME_CALL,
    TIME_SPEC,
    WEATHER_CALL,
    WEATHER_SPEC,
    FakeAPI,
    Trickle,
    anthropic_client,
    claude,
    events_of,
    request,
    result,
    sse,
    weather_tools,
)


# ======================================================================= Anthropic: the response


async def test_anthropic_text_streams_as_deltas_then_finish_with_start_input_and_delta_output_tokens():
    events = await events_of(claude(FakeAPI(rec.ANTHROPIC_TEXT)))
    assert events == [
        {"type": "text-delta", "text": "Hello"},
        {"type": "text-delta", "text": "! How can I"},
        {"type": "text-delta", "text": " help you today?"},
        {"type": "finish", "usage": {"input_tokens": 25, "output_tokens": 12}, "finish_reason": "stop"},
    ]


async def test_anthropic_tool_use_blocks_become_tool_calls_with_their_streamed_json_input():
    events = await events_of(claude(FakeAPI(rec.ANTHROPIC_TOOL_USE)))
    assert events == [
        {"type": "text-delta", "text": "I'll check the weather in Paris"},
        {"type": "text-delta", "text": " and the time in Tokyo."},
        {
            "type": "tool-call",
            "tool_call_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "tool_name": "get_weather",
            "input": {"city": "Paris", "unit": "celsius"},
        },
        {"type": "tool-call", "tool_call_id": "toolu_01VqG2jCdyjoB9HMTFnCKeo2", "tool_name": "get_time", "input": {"timezone": "Asia/Tokyo"}},
        {"type": "finish", "usage": {"input_tokens": 472, "output_tokens": 89}, "finish_reason": "tool-calls"},
    ]


async def test_anthropic_tool_use_with_an_empty_json_stream_has_an_empty_input():
    events = await events_of(claude(FakeAPI(rec.ANTHROPIC_TOOL_USE_NO_INPUT)))
    assert events[0] == {"type": "tool-call", "tool_call_id": "toolu_01NRLabsLyVHZPKxbKvkfSMn", "tool_name": "get_time", "input": {}}


async def test_anthropic_events_leave_as_their_blocks_arrive_not_when_the_response_ends():
    body = Trickle(rec.ANTHROPIC_TOOL_USE)
    model = claude(FakeAPI(sse(body)))
    sent_at: dict[str, int] = {}
    async for event in model.stream(request()):
        sent_at.setdefault(event.get("tool_name") or event["type"], body.sent)
    assert sent_at["text-delta"] == body.position('"text_delta"')
    assert sent_at["get_weather"] == body.position('"content_block_stop","index":1')
    assert sent_at["get_weather"] < len(body.events)


async def test_anthropic_error_event_mid_stream_raises_after_the_text_so_far():
    model = claude(FakeAPI(rec.ANTHROPIC_OVERLOADED_MID_STREAM))
    seen = []
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        async for event in model.stream(request()):
            if event["type"] != "usage":
                seen.append(event)
    assert seen == [{"type": "text-delta", "text": "Hello"}]


# ======================================================================== Anthropic: the request


async def test_anthropic_request_sends_model_max_tokens_and_stream():
    api = FakeAPI(rec.ANTHROPIC_TEXT)
    await events_of(claude(api, max_tokens=1024))
    body = api.bodies[0]
    assert (body["model"], body["max_tokens"], body["stream"]) == ("claude-sonnet-4-6", 1024, True)
    assert api.requests[0].url.path == "/v1/messages"


async def test_anthropic_system_prompt_and_system_messages_go_to_system_not_messages():
    api = FakeAPI(rec.ANTHROPIC_TEXT)
    req = request(
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Hi"},
        system="Be brief.",
    )
    await events_of(claude(api), req)
    body = api.bodies[0]
    assert body["system"] == "Be brief.\n\nAnswer in French."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]


async def test_anthropic_without_a_system_prompt_sends_no_system():
    api = FakeAPI(rec.ANTHROPIC_TEXT)
    await events_of(claude(api))
    assert "system" not in api.bodies[0]


async def test_anthropic_assistant_tool_calls_become_tool_use_blocks():
    api = FakeAPI(rec.ANTHROPIC_TEXT)
    req = request(
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, WEATHER_CALL]},
        {"role": "tool", "content": [result("toolu_1", "get_weather", "18C")]},
    )
    await events_of(claude(api), req)
    assert api.bodies[0]["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
    }


async def test_anthropic_tool_messages_become_a_user_turn_of_tool_result_blocks():
    api = FakeAPI(rec.ANTHROPIC_TEXT)
    req = request(
        {"role": "user", "content": "Weather in Paris, time in Tokyo?"},
        {"role": "assistant", "content": [WEATHER_CALL, TIME_CALL]},
        {
            "role": "tool",
            "content": [
                result("toolu_1", "get_weather", {"temp_c": 18, "sky": "clear"}),
                result("toolu_2", "get_time", "Unknown tool: 'get_time'.", is_error=True),
            ],
        },
    )
    await events_of(claude(api), req)
    assert api.bodies[0]["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"sky": "clear", "temp_c": 18}', "is_error": False},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Unknown tool: 'get_time'.", "is_error": True},
        ],
    }


async def test_anthropic_merges_consecutive_same_role_turns_with_tool_results_first():
    api = FakeAPI(rec.ANTHROPIC_TEXT)
    req = request(
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "user", "content": "In Celsius, please."},
        {"role": "assistant", "content": [WEATHER_CALL]},
        {"role": "tool", "content": [result("toolu_1", "get_weather", "18C")]},
        {"role": "user", "content": "And tomorrow?"},
    )
    await events_of(claude(api), req)
    assert api.bodies[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}, {"type": "text", "text": "In Celsius, please."}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C", "is_error": False},
                {"type": "text", "text": "And tomorrow?"},
            ],
        },
    ]


async def test_anthropic_puts_tool_results_before_user_text_that_came_ahead_of_them():
    # The API rejects a turn after tool_use whose tool_result blocks are not its first blocks.
    api = FakeAPI(rec.ANTHROPIC_TEXT)
    req = request(
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [WEATHER_CALL]},
        {"role": "user", "content": "Hurry up."},
        {"role": "tool", "content": [result("toolu_1", "get_weather", "18C")]},
    )
    await events_of(claude(api), req)
    assert api.bodies[0]["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C", "is_error": False},
        {"type": "text", "text": "Hurry up."},
    ]


async def test_anthropic_drops_an_empty_assistant_turn_and_merges_the_user_turns_around_it():
    api = FakeAPI(rec.ANTHROPIC_TEXT)
    req = request(
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": []},
        {"role": "user", "content": "Still there?"},
    )
    await events_of(claude(api), req)
    assert api.bodies[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "Still there?"}]}
    ]


async def test_anthropic_images_and_pdfs_are_sent_as_base64_blocks():
    api = FakeAPI(rec.ANTHROPIC_TEXT)
    req = request(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare these."},
                {"type": "image", "data": PNG, "media_type": "image/png"},
                {"type": "file", "data": PDF, "media_type": "application/pdf"},
            ],
        }
    )
    await events_of(claude(api), req)
    assert api.bodies[0]["messages"][0]["content"] == [
        {"type": "text", "text": "Compare these."},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": base64.b64encode(PDF).decode()}},
    ]


async def test_anthropic_tools_are_sent_as_name_description_input_schema():
    api = FakeAPI(rec.ANTHROPIC_TEXT)
    await events_of(claude(api), request(tools=[WEATHER_SPEC, TIME_SPEC]))
    assert api.bodies[0]["tools"] == [WEATHER_SPEC, TIME_SPEC]


# ========================================================================= Anthropic: errors


async def test_anthropic_auth_error_raises_the_sdk_error_without_the_key():
    api = FakeAPI(httpx2.Response(401, json=rec.ANTHROPIC_401_BODY))
    with pytest.raises(anthropic.AuthenticationError) as info:
        await events_of(claude(api))
    assert info.value.status_code == 401
    assert ANTHROPIC_KEY not in str(info.value)
    assert ANTHROPIC_KEY in api.requests[0].headers.get("authorization", "") + api.requests[0].headers.get("x-api-key", "")


async def test_anthropic_error_that_echoes_the_key_is_scrubbed_of_it():
    body = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {ANTHROPIC_KEY}"}}
    api = FakeAPI(httpx2.Response(401, json=body))
    with pytest.raises(anthropic.AuthenticationError) as info:
        await events_of(claude(api))
    assert ANTHROPIC_KEY not in str(info.value)
    assert ANTHROPIC_KEY not in json.dumps(info.value.body)


async def test_anthropic_server_error_raises_when_the_client_does_not_retry():
    api = FakeAPI(httpx2.Response(500, json=rec.ANTHROPIC_500_BODY), rec.ANTHROPIC_TEXT)
    with pytest.raises(anthropic.InternalServerError):
        await events_of(claude(api))
    assert len(api.requests) == 1


async def test_anthropic_server_error_is_retried_by_a_client_that_retries():
    failure = httpx2.Response(500, headers={"retry-after-ms": "1"}, json=rec.ANTHROPIC_500_BODY)
    api = FakeAPI(failure, rec.ANTHROPIC_TEXT)
    model = AnthropicModel("claude-sonnet-4-6", client=anthropic_client(api, max_retries=1))
    events = await events_of(model)
    assert (len(api.requests), events[-1]["type"]) == (2, "finish")


# ====================================================================== Anthropic: end to end


async def test_generate_text_runs_a_tool_loop_on_anthropic():
    api = FakeAPI(rec.ANTHROPIC_TOOL_USE, rec.ANTHROPIC_FINAL)
    result_ = await generate_text(
        model=claude(api), messages=[{"role": "user", "content": "Weather in Paris, time in Tokyo?"}], tools=weather_tools(), max_steps=3
    )
    assert (result_.text, result_.finish_reason) == ("It is 18°C in Paris and 21:05 in Tokyo.", "stop")
    assert api.bodies[1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll check the weather in Paris and the time in Tokyo."},
                {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather", "input": {"city": "Paris", "unit": "celsius"}},
                {"type": "tool_use", "id": "toolu_01VqG2jCdyjoB9HMTFnCKeo2", "name": "get_time", "input": {"timezone": "Asia/Tokyo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "content": '{"city": "Paris", "temp_c": 18}', "is_error": False},
                {"type": "tool_result", "tool_use_id": "toolu_01VqG2jCdyjoB9HMTFnCKeo2", "content": "21:05", "is_error": False},
            ],
        },
    ]


async def test_anthropic_usage_and_cost_add_up_over_the_tool_loop():
    api = FakeAPI(rec.ANTHROPIC_TOOL_USE, rec.ANTHROPIC_FINAL)
    model = claude(api, pricing={"input": 3e-6, "output": 15e-6})
    result_ = await generate_text(model=model, messages=[{"role": "user", "content": "Go"}], tools=weather_tools(), max_steps=3)
    assert result_.usage == {
        "input_tokens": 472 + 603,
        "output_tokens": 89 + 21,
        "total_tokens": 472 + 603 + 89 + 21,
        "cost": pytest.approx((472 + 603) * 3e-6 + (89 + 21) * 15e-6),
    }


# ==================================================================== Anthropic: construction


async def test_create_anthropic_makes_models_that_call_their_model_id():
    api = FakeAPI(rec.ANTHROPIC_TEXT)
    provider = create_anthropic(client=anthropic_client(api), max_tokens=256)
    await events_of(provider("claude-haiku-4-5"))
    assert (api.bodies[0]["model"], api.bodies[0]["max_tokens"]) == ("claude-haiku-4-5", 256)


def test_anthropic_model_builds_its_client_from_api_key_and_base_url():
    model = create_anthropic(api_key=ANTHROPIC_KEY, base_url="http://claude.internal:8080")("claude-sonnet-4-6")
    assert (model.client.api_key, str(model.client.base_url).rstrip("/")) == (ANTHROPIC_KEY, "http://claude.internal:8080")


@pytest.mark.parametrize(
    "model_class, model_id, key",
    [(AnthropicModel, "claude-sonnet-4-6", ANTHROPIC_KEY), (OpenAIChatModel, "gpt-4o", OPENAI_KEY)],
    ids=["anthropic", "openai"],
)
def test_each_provider_model_builds_one_client_per_event_loop(model_class, model_id, key):
    model = model_class(model_id, api_key=key)

    async def clients() -> tuple[Any, Any]:
        return model.client, model.client

    first, again = asyncio.run(clients())
    later, _ = asyncio.run(clients())
    assert first is again
    assert later is not first


def test_anthropic_model_refuses_a_client_together_with_an_api_key():
    with pytest.raises(TypeError):
        AnthropicModel("claude-sonnet-4-6", client=anthropic_client(FakeAPI()), api_key=ANTHROPIC_KEY)



# ========================================================================== importing


def test_importing_the_providers_imports_neither_sdk_nor_django():
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    code = (
        "import sys, runs.runtime.providers\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'anthropic', 'openai', 'httpx2'}))"
    )
    completed = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert completed.stdout.strip() == "[]"


def test_a_tool_output_reads_the_same_whatever_the_order_of_its_keys():
    from runs.runtime.providers.base import _output_text

    assert _output_text({"b": 1, "a": {"d": 2, "c": 3}}) == _output_text({"a": {"c": 3, "d": 2}, "b": 1})
