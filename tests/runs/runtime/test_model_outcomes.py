"""How the loop reports what a model call came to: finish reasons, unusable tool input, classified failures, usage."""

from __future__ import annotations

import asyncio
import email.utils
import time
from types import SimpleNamespace
from typing import Any

import pytest

from runs.runtime import Deps, generate_text, stream_chat, tool
from runs.runtime.durable import create_in_memory_session_store, resume_from_checkpoint, resume_stream_from_checkpoint
from runs.runtime.exceptions import ModelCallError, classify_model_error
from runs.runtime.testing import ScriptedModel
from runs.runtime.usage import add_usage, normalize_usage
from tests.runs.runtime.scripting import Crash, calls, collect, says, user

CUT_OFF = "The tool call's input was cut off at the output limit (max_tokens=64); the tool was not run."


def broken_call(tool_call_id: str = "c1") -> dict[str, Any]:
    return {"type": "tool_call", "tool_name": "ping", "tool_call_id": tool_call_id, "input": {}, "input_error": CUT_OFF}


class Failing:
    """A model whose stream raises ``error`` after it yielded ``events``."""

    model_id = "failing"

    def __init__(self, error: BaseException, *events: dict[str, Any]) -> None:
        self.error = error
        self.events = events

    async def stream(self, request: dict[str, Any]):
        for event in self.events:
            yield event
        raise self.error


def ping_tool(ran: list[Any]) -> dict[str, Any]:
    return {"ping": tool(execute=lambda i, ctx: ran.append(i) or "pong")}


# ================================================================================ finish reasons


async def test_a_final_answer_cut_at_the_output_limit_finishes_with_length():
    stream = stream_chat(model=ScriptedModel([{**says("Once upon"), "finish_reason": "length"}]), messages=user("story"))
    parts = await collect(stream.full_stream)
    assert [(p["type"], p.get("finish_reason")) for p in parts if p["type"] in ("step-finish", "finish")] == [
        ("step-finish", "length"),
        ("finish", "length"),
    ]


async def test_a_step_without_a_reported_reason_is_inferred_from_its_calls():
    ran: list[Any] = []
    result = await generate_text(
        model=ScriptedModel([calls(broken_call()), says("done")]), messages=user("go"), tools=ping_tool(ran), max_steps=2
    )
    assert [step.finish_reason for step in result.steps] == ["tool-calls", "stop"]


async def test_an_unknown_reason_from_a_model_is_not_passed_on():
    result = await generate_text(model=ScriptedModel([{**says("hi"), "finish_reason": "banana"}]), messages=user("go"))
    assert (result.steps[0].finish_reason, result.finish_reason) == ("stop", "stop")


# ======================================================================== unusable tool input


async def test_a_call_with_unusable_input_is_answered_with_its_reason_and_not_run():
    ran: list[Any] = []
    model = ScriptedModel([calls(broken_call()), says("I will try again.")])
    result = await generate_text(model=model, messages=user("go"), tools=ping_tool(ran), max_steps=2)
    assert ran == []
    assert model.requests[1]["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_call_id": "c1", "tool_name": "ping", "output": CUT_OFF, "is_error": True}
    ]
    assert result.finish_reason == "stop"


async def test_a_call_with_unusable_input_asks_no_approval():
    approvals: list[Any] = []
    tools = {"ping": tool(execute=lambda i, ctx: "pong", needs_approval=True)}
    result = await generate_text(
        model=ScriptedModel([calls(broken_call()), says("ok")]), messages=user("go"), tools=tools, max_steps=2,
        approve_tool_call=lambda request: approvals.append(request) or True,
    )
    assert (approvals, result.pending_approvals, result.steps[0].tool_results[0]["is_error"]) == ([], [], True)


async def test_the_tool_call_part_names_the_input_error():
    stream = stream_chat(model=ScriptedModel([calls(broken_call()), says("ok")]), messages=user("go"), tools=ping_tool([]), max_steps=2)
    parts = await collect(stream.full_stream)
    assert next(p for p in parts if p["type"] == "tool-call")["input_error"] == CUT_OFF


async def test_a_resumed_decision_with_unusable_input_gets_the_same_error_without_asking_the_model():
    store = create_in_memory_session_store()

    def dies(point: str) -> None:
        if point == "after-model-decision":
            raise Crash()

    with pytest.raises(Crash):
        await generate_text(model=ScriptedModel([calls(broken_call())]), messages=user("go"), tools=ping_tool([]),
                            max_steps=2, session={"store": store, "run_id": "r1"}, deps=Deps(fault=dies))
    model = ScriptedModel([says("ok")])
    result = await resume_from_checkpoint(store, "r1", model=model, tools=ping_tool([]), max_steps=2)
    assert model.requests[0]["messages"][-1]["content"][0]["output"] == CUT_OFF
    assert result.text == "ok"


async def test_a_non_object_input_is_an_input_error():
    class ListInput:
        model_id = "list-input"
        requests: list[Any] = []

        async def stream(self, request):
            self.requests.append(request)
            if len(self.requests) == 1:
                yield {"type": "tool-call", "tool_call_id": "c1", "tool_name": "ping", "input": ["a"]}
            yield {"type": "finish", "usage": {}}

    ran: list[Any] = []
    result = await generate_text(model=ListInput(), messages=user("go"), tools=ping_tool(ran), max_steps=2)
    assert (ran, result.steps[0].tool_results[0]["output"].startswith("The tool call's input is not a JSON object")) == ([], True)


# ==================================================================================== failures


async def test_a_transport_failure_of_a_model_is_a_transient_model_call_error():
    error = ConnectionResetError("reset by peer")
    with pytest.raises(ModelCallError) as raised:
        await generate_text(model=Failing(error), messages=user("go"))
    assert (raised.value.is_transient, raised.value.reason, raised.value.__cause__) == (True, "connection", error)


async def test_a_programming_error_in_a_model_is_permanent():
    with pytest.raises(ModelCallError) as raised:
        await generate_text(model=Failing(ValueError("cannot send a 'video' part")), messages=user("go"))
    assert (raised.value.is_transient, raised.value.error_name, raised.value.reason) == (False, "ValueError", "other")


async def test_the_error_part_of_a_model_failure_says_it_is_retryable():
    stream = stream_chat(model=Failing(TimeoutError("read timed out")), messages=user("go"))
    parts = await collect(stream.full_stream)
    assert parts[-1] == {
        "type": "error",
        "error": {"name": "TimeoutError", "message": "read timed out"},
        "retryable": True,
        "retry_after_ms": None,
    }
    assert isinstance(await stream.error, ModelCallError)


async def test_an_unreachable_store_is_a_retryable_error_part():
    class Down:
        def save(self, checkpoint): ...

        def load(self, run_id):
            raise TimeoutError("no answer")

    parts = await collect(resume_stream_from_checkpoint(Down(), "r1", model=ScriptedModel([])).full_stream)
    assert (parts[-1]["error"]["name"], parts[-1]["retryable"]) == ("StoreUnavailableError", True)


async def test_a_model_failure_message_is_redacted_of_secrets():
    secret = "sk-live-9f8e7d6c5b4a39281706f5e4"
    with pytest.raises(ModelCallError) as raised:
        await generate_text(model=Failing(ConnectionError(f"proxy refused key {secret}")), messages=user("go"),
                            deps=Deps(secrets=(secret,)))
    assert secret not in str(raised.value)


async def test_a_successful_stream_has_no_error():
    stream = stream_chat(model=ScriptedModel([says("hi")]), messages=user("go"))
    await stream.consume()
    assert await stream.error is None


async def test_a_failed_step_reports_the_usage_its_model_had_reported():
    model = Failing(ConnectionError("cut"), {"type": "usage", "usage": {"input_tokens": 900, "output_tokens": 3}})
    with pytest.raises(ModelCallError) as raised:
        await generate_text(model=model, messages=user("go"))
    assert (raised.value.usage["input_tokens"], raised.value.usage["output_tokens"]) == (900, 3)


def response_error(status: int | None, headers: dict[str, str], body: Any = None, name: str = "APIStatusError") -> Exception:
    error = type(name, (Exception,), {})("failed")
    error.status_code = status
    error.response = SimpleNamespace(headers=headers)
    error.body = body
    return error


@pytest.mark.parametrize(
    ("status", "transient", "reason"),
    [(408, True, "timeout"), (409, True, "server"), (429, True, "rate-limit"), (502, True, "server"), (503, True, "overloaded"),
     (504, True, "timeout"), (529, True, "overloaded"), (400, False, "bad-request"), (401, False, "auth"), (403, False, "auth"),
     (404, False, "bad-request"), (422, False, "bad-request")],
)
def test_http_statuses_are_classified(status, transient, reason):
    error = classify_model_error(response_error(status, {}))
    assert (error.is_transient, error.reason, error.status_code) == (transient, reason, status)


def test_retry_after_as_an_http_date_is_the_wait_until_then():
    later = email.utils.formatdate(time.time() + 120, usegmt=True)
    wait = classify_model_error(response_error(429, {"retry-after": later})).retry_after_ms
    assert 110_000 <= wait <= 121_000


def test_retry_after_ms_wins_over_retry_after():
    error = classify_model_error(response_error(429, {"retry-after-ms": "1500", "retry-after": "9"}))
    assert error.retry_after_ms == 1500


def test_the_provider_saying_do_not_retry_makes_a_5xx_permanent():
    assert classify_model_error(response_error(500, {"x-should-retry": "false"})).is_transient is False


@pytest.mark.parametrize(
    ("body", "transient", "reason"),
    [
        ({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}, True, "rate-limit"),
        ({"message": "bad", "type": "invalid_request_error", "code": "context_length_exceeded"}, False, "bad-request"),
        ({"message": "oops", "type": "server_error", "code": None}, True, "server"),
    ],
)
def test_an_error_inside_a_200_stream_is_classified_by_its_body(body, transient, reason):
    error = classify_model_error(response_error(200, {}, body))
    assert (error.is_transient, error.reason, error.status_code) == (transient, reason, None)


# ======================================================================================= usage


def test_cache_tokens_are_priced_at_their_rates_and_fresh_input_at_the_input_rate():
    usage = normalize_usage(
        {"input_tokens": 1000, "output_tokens": 10, "cache_read_tokens": 600, "cache_write_tokens": 300},
        pricing={"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
    )
    assert usage["cost"] == pytest.approx(100 * 3.0 + 600 * 0.3 + 300 * 3.75 + 10 * 15.0)


def test_cache_keys_add_up_and_stay_absent_when_no_model_reported_them():
    plain = normalize_usage({"input_tokens": 5, "output_tokens": 1})
    cached = normalize_usage({"input_tokens": 50, "output_tokens": 1, "cache_read_tokens": 40})
    assert "cache_read_tokens" not in add_usage(plain, plain)
    assert add_usage(add_usage(plain, cached), cached)["cache_read_tokens"] == 80


async def test_an_abort_during_the_tool_phase_keeps_the_steps_model_usage():
    signal = asyncio.Event()

    async def slow(tool_input: dict[str, Any], ctx: Any) -> str:
        signal.set()
        await asyncio.sleep(3600)
        return "never"

    model = ScriptedModel([calls({"type": "tool_call", "tool_name": "slow", "tool_call_id": "c1", "input": {}}, input_tokens=70, output_tokens=7)])
    result = await generate_text(model=model, messages=user("go"), tools={"slow": tool(execute=slow)}, max_steps=2, signal=signal)
    assert (result.finish_reason, result.usage) == ("aborted", {"input_tokens": 70, "output_tokens": 7, "total_tokens": 77})
