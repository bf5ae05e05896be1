"""The Anthropic provider (and the pooled clients, the price table) against a local HTTP server speaking its
streaming format (``local_api.LocalAPI``); the OpenAI provider's are in test_provider_http_openai.py.

Each test asserts what went over the socket (headers, body: cache markers, limits, stream options) and
what the runtime made of the answer (model events, stream parts, results, classified errors).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import pytest

from runs.runtime import generate_text, stream_chat, tool
from runs.runtime.durable import create_in_memory_session_store, resume_from_checkpoint
from runs.runtime.exceptions import ModelCallError
from runs.runtime.providers import AnthropicModel, aclose_clients, price_for
from tests.runs.runtime import provider_recordings as rec
from tests.runs.runtime.local_api import HangReply, JSONReply, SSEReply
from tests.runs.runtime.local_providers import (
    ANTHROPIC_KEY,
    EPHEMERAL,
    TIME_SCHEMA,
    claude,
    failure_of,
    parts_of,
    user,
    weather_tools,
)

pytestmark = pytest.mark.usefixtures("no_provider_environment")


# ============================================================================ Anthropic: the request


async def test_anthropic_request_carries_the_key_version_default_max_tokens_and_cache_markers(serve):
    api = serve(rec.ANTHROPIC_TEXT)
    await generate_text(model=claude(api), messages=user("Hi"), system="Be brief.")
    sent = api.requests[0]
    credentials = sent.headers.get("x-api-key", "") + sent.headers.get("authorization", "")  # SDK versions differ
    assert (sent.path, ANTHROPIC_KEY in credentials, "anthropic-version" in sent.headers) == ("/v1/messages", True, True)
    assert sent.body == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 8192,
        "stream": True,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": EPHEMERAL}]}],
    }


async def test_anthropic_marks_the_last_tool_the_stable_prefix_and_the_final_turn_for_caching(serve):
    api = serve(rec.ANTHROPIC_TOOL_USE, rec.ANTHROPIC_FINAL)
    await generate_text(model=claude(api), messages=user("Weather in Paris, time in Tokyo?"), tools=weather_tools(), max_steps=2)
    second = api.bodies[1]
    assert [("cache_control" in spec) for spec in second["tools"]] == [False, True]
    marked = [
        (turn["role"], index)
        for turn in second["messages"]
        for index, block in enumerate(turn["content"])
        if "cache_control" in block
    ]
    # The first request's last turn (the question, which it wrote to the cache) and this request's last block.
    assert marked == [("user", 0), ("user", 1)]
    assert second["messages"][0] == api.bodies[0]["messages"][0]  # the same bytes at the breakpoint: a cache hit


async def test_a_resumed_leg_sends_the_prefix_its_first_leg_wrote_to_the_cache(serve):
    # Leg 1 asks the model, which calls an approval-gated tool: the run suspends. Leg 2 (a resume, as in a
    # new worker process) sends the same prefix with a breakpoint where leg 1's request ended.
    api = serve(rec.ANTHROPIC_TOOL_USE_NO_INPUT, rec.ANTHROPIC_FINAL)
    store = create_in_memory_session_store()
    # The recording's call has no arguments (ANTHROPIC_TOOL_USE_NO_INPUT), so the tool takes none: an input that
    # does not match the schema would be refused before any approval is asked.
    tools = {"get_time": tool(description="The time.", input_schema={"type": "object", "properties": {}},
                              execute=lambda i, ctx: "21:05", needs_approval=True)}
    first = await generate_text(
        model=claude(api), messages=user("What time is it?"), tools=tools, system="Be brief.", session={"store": store}, max_steps=3
    )
    [request] = first.pending_approvals
    await resume_from_checkpoint(
        store, first.run_id, model=claude(api), tools=tools, system="Be brief.", max_steps=3,
        approval_responses=[{"approval_id": request["approval_id"], "approved": True}],
    )
    leg1, leg2 = api.bodies
    assert leg2["system"] == leg1["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert leg2["tools"] == leg1["tools"]
    assert leg2["messages"][0] == leg1["messages"][-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "What time is it?", "cache_control": EPHEMERAL}],
    }
    assert leg2["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL


async def test_anthropic_prompt_caching_can_be_switched_off(serve):
    api = serve(rec.ANTHROPIC_TEXT)
    await generate_text(model=claude(api, prompt_caching=False), messages=user("Hi"), system="Be brief.")
    assert "cache_control" not in json.dumps(api.bodies[0])
    assert api.bodies[0]["system"] == "Be brief."


async def test_anthropic_model_options_reach_the_request(serve):
    api = serve(rec.ANTHROPIC_TEXT)
    model = claude(
        api,
        max_tokens=1024,
        temperature=0.2,
        tool_choice="required",
        extra_headers={"anthropic-beta": "context-1m-2025-08-07"},
        extra_body={"metadata": {"user_id": "u-42"}},
    )
    await generate_text(model=model, messages=user("Hi"), tools=weather_tools())
    sent = api.requests[0]
    assert (sent.body["max_tokens"], sent.body["temperature"], sent.body["tool_choice"]) == (1024, 0.2, {"type": "any"})
    assert (sent.headers["anthropic-beta"], sent.body["metadata"]) == ("context-1m-2025-08-07", {"user_id": "u-42"})


async def test_anthropic_tool_choice_of_one_tool_names_it(serve):
    api = serve(rec.ANTHROPIC_TEXT)
    await generate_text(model=claude(api, tool_choice={"tool_name": "get_time"}), messages=user("Hi"), tools=weather_tools())
    assert api.bodies[0]["tool_choice"] == {"type": "tool", "name": "get_time"}


async def test_anthropic_sends_no_tool_choice_without_tools(serve):
    api = serve(rec.ANTHROPIC_TEXT)
    await generate_text(model=claude(api, tool_choice="required"), messages=user("Hi"))
    assert "tool_choice" not in api.bodies[0]


async def test_a_local_anthropic_server_needs_no_key_and_gets_no_credentials(serve):
    api = serve(rec.ANTHROPIC_TEXT)
    result = await generate_text(model=claude(api, api_key=None), messages=user("Hi"))
    assert result.text == "Hello! How can I help you today?"
    assert {"x-api-key", "authorization"} & set(api.requests[0].headers) == set()


async def test_a_remote_anthropic_url_without_a_key_is_a_permanent_error_naming_the_variable():
    model = AnthropicModel("claude-sonnet-4-6", base_url="https://claude.example.com", max_retries=0)
    error = await failure_of(generate_text(model=model, messages=user("Hi")))
    assert (error.is_transient, error.reason, "ANTHROPIC_API_KEY" in str(error)) == (False, "auth", True)


async def test_anthropic_max_retries_is_the_clients_own_quick_retry(serve):
    overloaded = JSONReply(529, rec.ANTHROPIC_529_BODY, headers={"retry-after-ms": "1"})
    api = serve(overloaded, rec.ANTHROPIC_TEXT)
    result = await generate_text(model=claude(api, max_retries=1), messages=user("Hi"))
    assert (len(api.requests), result.text) == (2, "Hello! How can I help you today?")


async def test_anthropic_timeout_fails_a_silent_server_as_a_transient_timeout(serve):
    api = serve(HangReply())
    error = await failure_of(generate_text(model=claude(api, timeout=0.2), messages=user("Hi")))
    assert (error.error_name, error.is_transient, error.reason) == ("APITimeoutError", True, "timeout")


# ========================================================================= Anthropic: stop reasons


async def test_anthropic_max_tokens_is_a_length_finish_on_the_step_and_the_call(serve):
    api = serve(rec.ANTHROPIC_MAX_TOKENS_TEXT)
    parts = await parts_of(stream_chat(model=claude(api), messages=user("Tell me a story")))
    step_finish = next(part for part in parts if part["type"] == "step-finish")
    assert (step_finish["finish_reason"], parts[-1]["type"], parts[-1]["finish_reason"]) == ("length", "finish", "length")


async def test_anthropic_refusal_is_a_content_filter_finish(serve):
    api = serve(rec.ANTHROPIC_REFUSAL)
    result = await generate_text(model=claude(api), messages=user("Something harmful"))
    assert (result.finish_reason, result.steps[-1].finish_reason) == ("content-filter", "content-filter")


async def test_anthropic_end_turn_is_a_stop_and_tool_use_a_tool_calls_step(serve):
    api = serve(rec.ANTHROPIC_TOOL_USE, rec.ANTHROPIC_FINAL)
    result = await generate_text(model=claude(api), messages=user("Go"), tools=weather_tools(), max_steps=2)
    assert ([step.finish_reason for step in result.steps], result.finish_reason) == (["tool-calls", "stop"], "stop")


# ==================================================================== Anthropic: broken tool input


async def test_a_tool_call_cut_off_by_max_tokens_is_an_error_result_naming_the_limit(serve):
    api = serve(rec.ANTHROPIC_TOOL_USE_CUT_OFF, rec.ANTHROPIC_FINAL)
    ran: list[dict[str, Any]] = []
    stream = stream_chat(model=claude(api, max_tokens=4096), messages=user("Weather?"), tools=weather_tools(ran), max_steps=2)
    parts = await parts_of(stream)
    [result] = [part for part in parts if part["type"] == "tool-result"]
    assert (result["is_error"], ran) == (True, [])
    assert result["output"].startswith("The tool call's input was cut off at the output limit (max_tokens=4096)")
    assert [p["finish_reason"] for p in parts if p["type"] == "step-finish"] == ["length", "stop"]
    assert await stream.finish_reason == "stop"
    assert api.bodies[1]["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_01CutOffxJ34qAmk2tNTrN7U",
        "content": result["output"],
        "is_error": True,
        "cache_control": EPHEMERAL,
    }


async def test_malformed_tool_json_from_anthropic_goes_back_to_the_model_as_an_error(serve):
    api = serve(rec.ANTHROPIC_TOOL_USE_MALFORMED, rec.ANTHROPIC_FINAL)
    ran: list[dict[str, Any]] = []
    result = await generate_text(model=claude(api), messages=user("Weather?"), tools=weather_tools(ran), max_steps=2)
    [error] = result.steps[0].tool_results
    assert (error["is_error"], ran, result.finish_reason) == (True, [], "stop")
    assert error["output"].startswith("The tool call's input is not valid JSON (")
    assert """'{"city": "Paris",}'""" in error["output"]  # the model sees what it sent


async def test_a_broken_tool_call_is_kept_in_the_history_with_its_reason(serve):
    api = serve(rec.ANTHROPIC_TOOL_USE_MALFORMED, rec.ANTHROPIC_FINAL)
    result = await generate_text(model=claude(api), messages=user("Weather?"), tools=weather_tools(), max_steps=2)
    call = result.messages[1]["content"][0]
    assert (call["type"], call["input"], call["input_error"]) == ("tool_call", {}, result.steps[0].tool_results[0]["output"])


# =========================================================================== Anthropic: usage, cost


async def test_anthropic_cache_reads_and_writes_are_in_usage_and_input_tokens_counts_them(serve):
    api = serve(rec.ANTHROPIC_CACHED_TEXT)
    result = await generate_text(model=claude(api, pricing={"input": 3e-6, "output": 15e-6}), messages=user("Hi"))
    usage = dict(result.usage)
    cost = usage.pop("cost")
    assert usage == {
        "input_tokens": 25 + 200 + 1800,
        "output_tokens": 12,
        "total_tokens": 2025 + 12,
        "cache_read_tokens": 1800,
        "cache_write_tokens": 200,
    }
    assert cost == pytest.approx(2025 * 3e-6 + 12 * 15e-6)  # no cache prices given: input price for all


async def test_anthropic_cost_uses_the_price_tables_cache_rates(serve):
    api = serve(rec.ANTHROPIC_CACHED_TEXT)
    result = await generate_text(model=claude(api), messages=user("Hi"))
    assert result.usage["cost"] == pytest.approx((25 * 3.0 + 1800 * 0.30 + 200 * 3.75 + 12 * 15.0) / 1e6)


async def test_cost_exceeds_stops_a_real_model_run_on_the_priced_usage(serve):
    from runs.runtime import cost_exceeds

    api = serve(rec.ANTHROPIC_TOOL_USE, rec.ANTHROPIC_FINAL)
    result = await generate_text(
        model=claude(api), messages=user("Go"), tools=weather_tools(), max_steps=5, stop_when=cost_exceeds(0.001)
    )
    # Step 0 costs 472 input + 89 output tokens at $3/$15 per million: $0.002751 > $0.001.
    assert (result.finish_reason, len(api.requests)) == ("stop-condition", 1)


async def test_cache_usage_adds_up_across_steps(serve):
    cached_tool_use = rec.ANTHROPIC_TOOL_USE.replace(
        '"cache_creation_input_tokens":0,"cache_read_input_tokens":0', '"cache_creation_input_tokens":100,"cache_read_input_tokens":400'
    )
    api = serve(cached_tool_use, rec.ANTHROPIC_CACHED_TEXT)
    result = await generate_text(model=claude(api), messages=user("Go"), tools=weather_tools(), max_steps=2)
    assert (result.usage["cache_read_tokens"], result.usage["cache_write_tokens"]) == (400 + 1800, 100 + 200)
    assert result.usage["input_tokens"] == (472 + 100 + 400) + (25 + 200 + 1800)


async def test_an_aborted_step_reports_the_usage_received_so_far(serve):
    # The stream sends message_start (the prompt's usage) and one text delta, then stalls; the caller aborts.
    api = serve(SSEReply(rec.ANTHROPIC_CACHED_TEXT, hold_after=3))
    signal = asyncio.Event()
    stream = stream_chat(model=claude(api), messages=user("Hi"), signal=signal)
    async for part in stream.full_stream:
        if part["type"] == "text-delta":
            signal.set()
    usage = await stream.usage
    assert (await stream.finish_reason, usage["input_tokens"], usage["cache_read_tokens"]) == ("aborted", 2025, 1800)


# ============================================================================= Anthropic: errors


@pytest.mark.parametrize(
    ("reply", "name", "transient", "reason", "status", "retry_after_ms"),
    [
        (JSONReply(429, rec.ANTHROPIC_429_BODY, headers={"retry-after": "7"}), "RateLimitError", True, "rate-limit", 429, 7000),
        (JSONReply(529, rec.ANTHROPIC_529_BODY), "OverloadedError", True, "overloaded", 529, None),
        (JSONReply(500, rec.ANTHROPIC_500_BODY, headers={"retry-after-ms": "250"}), "InternalServerError", True, "server", 500, 250),
        (JSONReply(401, rec.ANTHROPIC_401_BODY), "AuthenticationError", False, "auth", 401, None),
        (JSONReply(400, rec.ANTHROPIC_400_BODY), "BadRequestError", False, "bad-request", 400, None),
    ],
)
async def test_anthropic_http_errors_are_classified_for_retries(serve, reply, name, transient, reason, status, retry_after_ms):
    api = serve(reply)
    error = await failure_of(generate_text(model=claude(api), messages=user("Hi")))
    assert (error.error_name, error.is_transient, error.reason, error.status_code, error.retry_after_ms) == (
        name, transient, reason, status, retry_after_ms,
    )


async def test_the_error_part_says_whether_and_when_to_retry(serve):
    api = serve(JSONReply(429, rec.ANTHROPIC_429_BODY, headers={"retry-after": "7"}))
    stream = stream_chat(model=claude(api), messages=user("Hi"))
    parts = await parts_of(stream)
    error = parts[-1]
    assert (error["type"], error["error"]["name"], error["retryable"], error["retry_after_ms"]) == ("error", "RateLimitError", True, 7000)
    failure = await stream.error
    assert isinstance(failure, ModelCallError) and isinstance(failure.__cause__, anthropic.RateLimitError)


async def test_a_permanent_error_part_is_not_retryable_and_carries_no_key(serve):
    body = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {ANTHROPIC_KEY}"}}
    api = serve(JSONReply(401, body))
    parts = await parts_of(stream_chat(model=claude(api), messages=user("Hi")))
    assert (parts[-1]["retryable"], ANTHROPIC_KEY in json.dumps(parts[-1])) == (False, False)


async def test_an_overloaded_event_inside_a_200_stream_is_transient(serve):
    api = serve(rec.ANTHROPIC_OVERLOADED_MID_STREAM)
    error = await failure_of(generate_text(model=claude(api), messages=user("Hi")))
    assert (error.is_transient, error.reason, error.status_code) == (True, "overloaded", None)


async def test_an_anthropic_stream_cut_mid_body_is_the_sdks_connection_error(serve):
    api = serve(SSEReply(rec.ANTHROPIC_TEXT, cut_after=4))
    model = claude(api)
    seen = []
    with pytest.raises(anthropic.APIConnectionError, match="stream was cut"):
        async for event in model.stream({"messages": user("Hi"), "tools": [], "system": None}):
            seen.append(event["type"])
    assert "text-delta" in seen


async def test_a_stream_cut_mid_step_is_a_transient_model_error(serve):
    api = serve(SSEReply(rec.ANTHROPIC_TEXT, cut_after=4))
    error = await failure_of(generate_text(model=claude(api), messages=user("Hi")))
    assert (error.error_name, error.is_transient, error.reason) == ("APIConnectionError", True, "stream-cut")


async def test_an_anthropic_stream_that_ends_before_message_stop_is_a_stream_cut(serve):
    api = serve(SSEReply(rec.ANTHROPIC_TEXT, end_after=5))
    error = await failure_of(generate_text(model=claude(api), messages=user("Hi")))
    assert (error.reason, "before message_stop" in str(error)) == ("stream-cut", True)


async def test_a_failed_leg_reports_the_usage_it_consumed(serve):
    api = serve(rec.ANTHROPIC_TOOL_USE, JSONReply(529, rec.ANTHROPIC_529_BODY))
    error = await failure_of(generate_text(model=claude(api), messages=user("Go"), tools=weather_tools(), max_steps=3))
    assert (error.usage["input_tokens"], error.usage["output_tokens"]) == (472, 89)


async def test_a_transient_failure_leaves_the_run_resumable_with_no_step_repeated(serve):
    # 429 three times, then success: each failed leg keeps the checkpoint of the step before, so the next leg
    # (what a worker's retry runs) continues there; the tool ran once.
    rate_limited = JSONReply(429, rec.ANTHROPIC_429_BODY, headers={"retry-after-ms": "1"})
    api = serve(rec.ANTHROPIC_TOOL_USE, rate_limited, rate_limited, rate_limited, rec.ANTHROPIC_FINAL)
    store = create_in_memory_session_store()
    ran: list[dict[str, Any]] = []
    options = dict(tools=weather_tools(ran), max_steps=3)
    with pytest.raises(ModelCallError):
        await generate_text(model=claude(api), messages=user("Go"), session={"store": store, "run_id": "r1"}, **options)
    for _ in range(2):
        with pytest.raises(ModelCallError) as raised:
            await resume_from_checkpoint(store, "r1", model=claude(api), **options)
        assert raised.value.is_transient
    result = await resume_from_checkpoint(store, "r1", model=claude(api), **options)
    assert (result.text, ran) == ("It is 18°C in Paris and 21:05 in Tokyo.", [{"city": "Paris", "unit": "celsius"}])
    assert [body["messages"][-1]["role"] for body in api.bodies[1:]] == ["user"] * 4  # each retry asks step 1 again


# ========================================================================== Anthropic: the clients


async def test_models_with_one_configuration_share_a_client_on_a_loop(serve):
    api = serve()
    first, second = claude(api), claude(api)
    assert first.client is second.client
    assert claude(api, timeout=5.0).client is not first.client


async def test_aclose_clients_closes_the_pooled_clients_and_a_new_call_builds_another(serve):
    api = serve(rec.ANTHROPIC_TEXT)
    model = claude(api)
    old = model.client
    assert await aclose_clients() == 1
    assert old.is_closed() and model.client is not old
    assert (await generate_text(model=model, messages=user("Hi"))).text == "Hello! How can I help you today?"


async def test_a_models_aclose_leaves_a_client_it_was_given_open(serve):
    api = serve()
    given = anthropic.AsyncAnthropic(api_key=ANTHROPIC_KEY, base_url=api.base_url)
    await AnthropicModel("claude-sonnet-4-6", client=given).aclose()
    assert not given.is_closed()
    await given.close()


def test_a_client_together_with_client_options_is_refused():
    given = anthropic.AsyncAnthropic(api_key=ANTHROPIC_KEY)
    with pytest.raises(TypeError, match="max_retries, timeout"):
        AnthropicModel("claude-sonnet-4-6", client=given, timeout=5.0, max_retries=1)


@pytest.mark.parametrize(
    ("option", "value"),
    [("timeout", 0), ("max_retries", -1), ("max_tokens", 0), ("temperature", "hot"), ("tool_choice", "sometimes"), ("extra_headers", {"x": 1})],
)
def test_bad_model_options_are_refused_at_construction(option, value):
    with pytest.raises((TypeError, ValueError), match=option):
        AnthropicModel("claude-sonnet-4-6", api_key=ANTHROPIC_KEY, **{option: value})


def test_timeout_and_max_retries_configure_the_sdk_client():
    client = AnthropicModel("claude-sonnet-4-6", api_key=ANTHROPIC_KEY, timeout=12.5, max_retries=5).client
    assert (client.timeout, client.max_retries) == (12.5, 5)



# ================================================================================ the price table


@pytest.mark.parametrize(
    ("model_id", "listed"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4"),
        ("claude-haiku-4-5", "claude-haiku-4-5"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ],
)
def test_the_price_table_matches_versions_and_dates_of_a_listed_model(model_id, listed):
    assert price_for(model_id) == price_for(listed) is not None


@pytest.mark.parametrize("model_id", ["llama3.1:8b", "gpt-4o-audio-preview", "claude-opus-4-7"])
def test_an_unlisted_model_has_no_price(model_id):
    assert price_for(model_id) is None
