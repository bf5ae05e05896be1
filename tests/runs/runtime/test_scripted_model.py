"""ScriptedModel used directly: the deterministic model behind the tests and the demo agents."""

from __future__ import annotations

from typing import Any

import pytest

from runs.runtime import RunError, ScriptExhaustedError
from runs.runtime.testing import ScriptedModel

pytestmark = pytest.mark.asyncio

TEXT = "Hello there,  world!\nThis reply streams as several deltas. "


def request(prompt: str = "hi") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}], "tools": [], "system": None}


async def events_of(model: ScriptedModel, req: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [event async for event in model.stream(req if req is not None else request())]


async def test_text_streams_as_several_deltas_that_concatenate_to_the_text():
    model = ScriptedModel([{"content": [{"type": "text", "text": TEXT}]}])
    deltas = [event for event in await events_of(model) if event["type"] == "text-delta"]
    assert len(deltas) > 1
    assert "".join(delta["text"] for delta in deltas) == TEXT


async def test_each_text_part_streams_in_order():
    model = ScriptedModel([{"content": [{"type": "text", "text": "first part. "}, {"type": "text", "text": "second"}]}])
    deltas = [event["text"] for event in await events_of(model) if event["type"] == "text-delta"]
    assert "".join(deltas) == "first part. second"


async def test_tool_call_part_becomes_a_tool_call_event_with_the_given_id():
    part = {"type": "tool_call", "tool_call_id": "call_42", "tool_name": "weather", "input": {"city": "Paris"}}
    model = ScriptedModel([{"content": [part]}])
    calls = [event for event in await events_of(model) if event["type"] == "tool-call"]
    assert calls == [{"type": "tool-call", "tool_call_id": "call_42", "tool_name": "weather", "input": {"city": "Paris"}}]


async def test_tool_call_without_an_id_gets_a_distinct_one():
    part = {"type": "tool_call", "tool_name": "weather", "input": {}}
    model = ScriptedModel([{"content": [part, part]}])
    ids = [event["tool_call_id"] for event in await events_of(model) if event["type"] == "tool-call"]
    assert len(ids) == 2
    assert all(isinstance(call_id, str) and call_id for call_id in ids)
    assert ids[0] != ids[1]


async def test_text_and_tool_calls_keep_their_scripted_order():
    model = ScriptedModel(
        [
            {
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_call", "tool_call_id": "c1", "tool_name": "a", "input": {}},
                    {"type": "tool_call", "tool_call_id": "c2", "tool_name": "b", "input": {}},
                ]
            }
        ]
    )
    kinds = [(event["type"], event.get("tool_call_id")) for event in await events_of(model)]
    assert kinds == [("text-delta", None), ("tool-call", "c1"), ("tool-call", "c2"), ("finish", None)]


async def test_finish_event_comes_last_and_carries_the_usage():
    model = ScriptedModel([{"content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 7, "output_tokens": 3}}])
    events = await events_of(model)
    assert events[-1] == {"type": "finish", "usage": {"input_tokens": 7, "output_tokens": 3}}
    assert [event["type"] for event in events].count("finish") == 1


async def test_finish_event_without_scripted_usage_reports_zero_tokens():
    model = ScriptedModel([{"content": [{"type": "text", "text": "ok"}]}])
    events = await events_of(model)
    assert events[-1] == {"type": "finish", "usage": {"input_tokens": 0, "output_tokens": 0}}


async def test_responses_are_used_in_script_order():
    model = ScriptedModel([{"content": [{"type": "text", "text": "one"}]}, {"content": [{"type": "text", "text": "two"}]}])
    first = await events_of(model)
    second = await events_of(model)
    assert first[0]["text"] == "one"
    assert second[0]["text"] == "two"


async def test_requests_records_each_request():
    model = ScriptedModel([{"content": [{"type": "text", "text": "a"}]}, {"content": [{"type": "text", "text": "b"}]}])
    await events_of(model, request("first"))
    await events_of(model, request("second"))
    assert model.requests == [request("first"), request("second")]


async def test_recorded_request_is_a_deep_copy():
    model = ScriptedModel([{"content": [{"type": "text", "text": "a"}]}])
    req = request("original")
    await events_of(model, req)
    req["messages"][0]["content"] = "changed"
    req["messages"].append({"role": "user", "content": "added"})
    req["system"] = "changed"
    assert model.requests == [request("original")]


async def test_callable_response_receives_the_request():
    seen = []

    def echo(req: dict[str, Any]) -> dict[str, Any]:
        seen.append(req)
        return {"content": [{"type": "text", "text": "you said " + req["messages"][-1]["content"]}]}

    model = ScriptedModel([echo])
    events = await events_of(model, request("bonjour"))
    assert seen == [request("bonjour")]
    assert "".join(event["text"] for event in events if event["type"] == "text-delta") == "you said bonjour"


async def test_running_out_of_script_raises_script_exhausted_error_with_a_clear_message():
    model = ScriptedModel([{"content": [{"type": "text", "text": "only"}]}], model_id="demo-model")
    await events_of(model)
    with pytest.raises(ScriptExhaustedError, match=r"'demo-model' has 1 response.*called 2 times"):
        await events_of(model)


async def test_an_empty_script_raises_script_exhausted_error_on_the_first_call():
    with pytest.raises(ScriptExhaustedError, match=r"0 response\(s\)"):
        await events_of(ScriptedModel([]))


async def test_script_exhausted_error_is_a_run_error():
    with pytest.raises(RunError):
        await events_of(ScriptedModel([]))


async def test_a_model_that_records_nothing_keeps_no_request_and_still_counts_its_calls():
    model = ScriptedModel([{"content": [{"type": "text", "text": "one"}]}, {"content": [{"type": "text", "text": "two"}]}],
                          record=False)
    await events_of(model)
    await events_of(model)
    assert (model.calls, model.requests) == (2, [])
