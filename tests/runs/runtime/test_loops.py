"""The agent loop through generate_text and stream_chat."""

from __future__ import annotations

import asyncio

import pytest

from runs.runtime import (
    cost_exceeds,
    generate_text,
    step_count_is,
    stream_chat,
    tool,
    total_tokens_exceed,
)
from runs.runtime.durable import create_in_memory_session_store
from runs.runtime.testing import ScriptedModel
from tests.runs.runtime.scripting import (
    Counter,
    RecordingStore,
    call,
    calls,
    collect,
    counting_tool,
    make_deps,
    says,
    types,
    user,
)


def looping_model(n: int) -> ScriptedModel:
    return ScriptedModel([calls(call("ping", f"c{i}")) for i in range(n)] + [says("done")])


async def test_generate_text_returns_the_final_text_after_tool_steps():
    counter = Counter()
    model = ScriptedModel([calls(call("ping", "c1", n=1)), says("All done.")])
    result = await generate_text(model=model, messages=user("go"), tools={"ping": counting_tool(counter)}, max_steps=5)
    assert (result.text, result.finish_reason, counter.inputs) == ("All done.", "stop", [{"n": 1}])


async def test_tool_results_are_fed_back_to_the_model():
    model = ScriptedModel([calls(call("add", "c1", a=2, b=3)), says("5")])
    add = tool(execute=lambda i, ctx: i["a"] + i["b"])
    await generate_text(model=model, messages=user("2+3"), tools={"add": add}, max_steps=3)
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message == {
        "role": "tool",
        "content": [{"type": "tool_result", "tool_call_id": "c1", "tool_name": "add", "output": 5, "is_error": False}],
    }


async def test_usage_sums_every_step_of_the_call():
    model = ScriptedModel([calls(call("ping", "c1"), input_tokens=7, output_tokens=3), says("ok", input_tokens=11, output_tokens=2)])
    result = await generate_text(model=model, messages=user("go"), tools={"ping": counting_tool(Counter())}, max_steps=3)
    assert result.usage == {"input_tokens": 18, "output_tokens": 5, "total_tokens": 23}


async def test_max_steps_is_a_runaway_guard():
    model = looping_model(10)
    result = await generate_text(model=model, messages=user("loop"), tools={"ping": counting_tool(Counter())}, max_steps=3)
    assert (result.finish_reason, model.calls) == ("max-steps", 3)


async def test_step_count_is_stops_the_run():
    model = looping_model(10)
    result = await generate_text(
        model=model, messages=user("loop"), tools={"ping": counting_tool(Counter())}, max_steps=10, stop_when=step_count_is(2)
    )
    assert (result.finish_reason, model.calls) == ("stop-condition", 2)


async def test_total_tokens_exceed_stops_the_run():
    model = looping_model(10)  # 15 tokens a step
    result = await generate_text(
        model=model, messages=user("loop"), tools={"ping": counting_tool(Counter())}, max_steps=10,
        stop_when=[total_tokens_exceed(40)],
    )
    assert (result.finish_reason, model.calls) == ("stop-condition", 3)


async def test_cost_exceeds_uses_the_models_price():
    model = looping_model(10)
    model.pricing = {"input": 0.001, "output": 0.002}  # 0.02 a step
    result = await generate_text(
        model=model, messages=user("loop"), tools={"ping": counting_tool(Counter())}, max_steps=10, stop_when=cost_exceeds(0.05)
    )
    assert (result.finish_reason, model.calls, round(result.usage["cost"], 6)) == ("stop-condition", 3, 0.06)


async def test_prepare_step_can_switch_the_model_for_the_next_step():
    first = ScriptedModel([calls(call("ping", "c1"))])
    second = ScriptedModel([says("from the second model")])
    result = await generate_text(
        model=first, messages=user("go"), tools={"ping": counting_tool(Counter())}, max_steps=3,
        prepare_step=lambda ctx: {"model": second} if ctx.step_index == 1 else None,
    )
    assert (result.text, first.calls, second.calls) == ("from the second model", 1, 1)


async def test_prepare_step_can_change_system_and_tools():
    model = ScriptedModel([says("ok")])
    extra = tool(description="extra", execute=lambda i, ctx: None)
    await generate_text(
        model=model, messages=user("go"), tools={"ping": counting_tool(Counter())}, system="base",
        prepare_step=lambda ctx: {"system": "changed", "tools": {"extra": extra}},
    )
    request = model.requests[0]
    assert (request["system"], [t["name"] for t in request["tools"]]) == ("changed", ["extra"])


async def test_prepare_step_sees_cumulative_usage():
    seen = []
    model = looping_model(2)
    await generate_text(
        model=model, messages=user("go"), tools={"ping": counting_tool(Counter())}, max_steps=5,
        prepare_step=lambda ctx: seen.append(ctx.usage["total_tokens"]),
    )
    assert seen == [0, 15, 30]


async def test_system_prompt_is_sent_apart_from_the_messages():
    model = ScriptedModel([says("hi")])
    await generate_text(model=model, messages=user("hello"), system="Be brief.")
    assert (model.requests[0]["system"], model.requests[0]["messages"]) == ("Be brief.", user("hello"))


def _concurrency_probe():
    state = {"now": 0, "max": 0}

    async def slow(tool_input, ctx):
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.01)
        state["now"] -= 1
        return "ok"

    return state, tool(execute=slow)


async def test_tool_calls_of_one_step_run_in_parallel():
    state, slow = _concurrency_probe()
    model = ScriptedModel([calls(*(call("slow", f"c{i}") for i in range(4))), says("done")])
    await generate_text(model=model, messages=user("go"), tools={"slow": slow}, max_steps=2)
    assert state["max"] == 4


async def test_max_tool_concurrency_bounds_parallel_calls():
    state, slow = _concurrency_probe()
    model = ScriptedModel([calls(*(call("slow", f"c{i}") for i in range(4))), says("done")])
    await generate_text(model=model, messages=user("go"), tools={"slow": slow}, max_steps=2, max_tool_concurrency=2)
    assert state["max"] == 2


async def test_results_keep_call_order_whatever_finishes_first():
    async def wait(tool_input, ctx):
        await asyncio.sleep(tool_input["ms"] / 1000)
        return tool_input["ms"]

    model = ScriptedModel([calls(call("wait", "a", ms=30), call("wait", "b", ms=1)), says("done")])
    result = await generate_text(model=model, messages=user("go"), tools={"wait": tool(execute=wait)}, max_steps=2)
    assert [part["tool_call_id"] for part in result.messages[-2]["content"]] == ["a", "b"]


async def test_a_throwing_tool_becomes_an_error_result_with_secrets_redacted():
    def leaky(tool_input, ctx):
        raise RuntimeError("upstream refused key sk-live-abcdefghijklmnop1234")

    model = ScriptedModel([calls(call("leaky", "c1")), says("I saw the error.")])
    result = await generate_text(model=model, messages=user("go"), tools={"leaky": tool(execute=leaky)}, max_steps=2)
    part = result.messages[2]["content"][0]
    assert part["is_error"] and "sk-live" not in part["output"] and "upstream refused key" in part["output"]


async def test_an_unknown_tool_is_an_error_result():
    model = ScriptedModel([calls(call("nope", "c1")), says("ok")])
    result = await generate_text(model=model, messages=user("go"), tools={"ping": counting_tool(Counter())}, max_steps=2)
    assert result.messages[2]["content"][0]["is_error"] is True


async def test_tools_may_be_given_as_a_list():
    counter = Counter()
    model = ScriptedModel([calls(call("ping", "c1")), says("ok")])
    await generate_text(model=model, messages=user("go"), tools=[tool(name="ping", execute=counter)], max_steps=2)
    assert counter.count == 1


async def test_abort_signal_stops_the_loop_and_skips_the_interrupted_checkpoint():
    signal = asyncio.Event()
    store = RecordingStore()

    async def hang(tool_input, ctx):
        signal.set()
        await asyncio.Event().wait()

    model = ScriptedModel([calls(call("hang", "c1")), says("never")])
    result = await generate_text(
        model=model, messages=user("go"), tools={"hang": tool(execute=hang)}, max_steps=3,
        session={"store": store, "run_id": "r1"}, signal=signal,
    )
    # Only the decision checkpoint exists: the interrupted tool step was not closed.
    assert (result.finish_reason, store.statuses("r1")) == ("aborted", [(0, "running")])


async def test_an_aborted_stream_ends_with_an_aborted_finish_part():
    signal = asyncio.Event()
    signal.set()
    stream = stream_chat(model=ScriptedModel([says("never")]), messages=user("go"), signal=signal)
    parts = await collect(stream.full_stream)
    assert parts[-1]["type"] == "finish" and parts[-1]["finish_reason"] == "aborted"


async def test_an_abort_its_caller_names_a_cancel_ends_with_a_cancelled_part_then_a_cancelled_finish():
    signal = asyncio.Event()
    model = ScriptedModel([says("one two three four")], delay_ms=1)
    cancel = {"by": "olga", "reason": "wrong expense"}
    stream = stream_chat(model=model, messages=user("go"), signal=signal, cancellation=lambda: cancel)
    parts = []
    async for part in stream.full_stream:
        parts.append(part)
        if part["type"] == "text-delta":
            signal.set()  # between two deltas
    assert parts[-2:] == [{"type": "cancelled", "by": "olga", "reason": "wrong expense"},
                          {"type": "finish", "finish_reason": "cancelled", "usage": parts[-1]["usage"]}]
    assert [part["text"] for part in parts if part["type"] == "text-delta"] == ["one "]


async def test_an_abort_that_is_no_cancel_stays_aborted_with_no_cancelled_part():
    signal = asyncio.Event()
    signal.set()
    stream = stream_chat(model=ScriptedModel([says("never")]), messages=user("go"), signal=signal,
                         cancellation=lambda: None)
    parts = await collect(stream.full_stream)
    assert "cancelled" not in types(parts) and parts[-1]["finish_reason"] == "aborted"


async def test_a_cancelled_call_asks_the_model_nothing_more():
    signal = asyncio.Event()

    async def cancelling(tool_input, ctx):
        signal.set()
        return "done"

    model = ScriptedModel([calls(call("cancelling", "c1")), says("never asked")])
    result = await generate_text(model=model, messages=user("go"), tools={"cancelling": tool(execute=cancelling)},
                                 max_steps=3, signal=signal, cancellation=lambda: {"by": None, "reason": ""})
    assert (result.finish_reason, model.calls) == ("cancelled", 1)


async def test_cancelling_the_call_saves_no_checkpoint_for_the_interrupted_step():
    store = RecordingStore()
    started = asyncio.Event()

    async def hang(tool_input, ctx):
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(generate_text(
        model=ScriptedModel([calls(call("hang", "c1"))]), messages=user("go"), tools={"hang": tool(execute=hang)},
        max_steps=3, session={"store": store, "run_id": "r1"},
    ))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.statuses("r1") == [(0, "running")]


async def test_stream_chat_exposes_the_run_id_before_the_first_part():
    deps, _ = make_deps()
    stream = stream_chat(
        model=ScriptedModel([says("hi")]), messages=user("go"), tools={"ping": counting_tool(Counter())},
        session={"store": create_in_memory_session_store()}, deps=deps,
    )
    run_id = stream.run_id
    parts = await collect(stream.full_stream)
    assert run_id == "id-1" and parts[0] == {"type": "start", "run_id": "id-1"}


async def test_stream_chat_parts_follow_the_wire_order():
    model = ScriptedModel([calls(call("ping", "c1"), text="Checking."), says("Done now.")])
    stream = stream_chat(model=model, messages=user("go"), tools={"ping": counting_tool(Counter())}, max_steps=3)
    parts = await collect(stream.full_stream)
    assert types(parts) == [
        "start", "step-start", "text-delta", "tool-call", "tool-result", "step-finish",
        "step-start", "text-delta", "text-delta", "step-finish", "finish",
    ]


async def test_text_stream_yields_the_text_deltas():
    stream = stream_chat(model=ScriptedModel([says("one two three")]), messages=user("go"))
    assert "".join([chunk async for chunk in stream.text_stream]) == "one two three"


async def test_stream_awaitables_can_be_awaited_twice():
    stream = stream_chat(model=ScriptedModel([says("hi", input_tokens=3, output_tokens=4)]), messages=user("go"))
    first = await stream.usage
    assert (first, await stream.usage, await stream.finish_reason, await stream.pending_approvals) == (
        {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}, first, "stop", []
    )


async def test_a_stream_is_readable_once():
    stream = stream_chat(model=ScriptedModel([says("hi")]), messages=user("go"))
    await collect(stream.full_stream)
    with pytest.raises(RuntimeError):
        await collect(stream.full_stream)


async def test_consume_drains_the_run_with_no_reader():
    counter = Counter()
    stream = stream_chat(model=ScriptedModel([calls(call("ping", "c1")), says("ok")]), messages=user("go"),
                         tools={"ping": counting_tool(counter)}, max_steps=2)
    await stream.consume()
    assert (counter.count, await stream.finish_reason) == (1, "stop")


async def test_a_stream_started_in_a_loop_runs_whether_or_not_anyone_reads():
    counter = Counter()
    stream_chat(model=ScriptedModel([calls(call("ping", "c1")), says("ok")]), messages=user("go"),
                tools={"ping": counting_tool(counter)}, max_steps=2)
    for _ in range(50):
        await asyncio.sleep(0.001)
        if counter.count:
            break
    assert counter.count == 1


async def test_both_loops_build_the_same_history():
    def script():
        return ScriptedModel([calls(call("ping", "c1", x=1), text="Let me see."), says("Seen.")])

    tools = {"ping": tool(execute=lambda i, ctx: "pong")}
    buffered = await generate_text(model=script(), messages=user("go"), tools=tools, max_steps=3)
    stream = stream_chat(model=script(), messages=user("go"), tools=tools, max_steps=3)
    streamed = await stream.result
    assert streamed.messages == buffered.messages


async def test_a_model_failure_in_a_stream_is_an_error_part_and_rejected_awaitables():
    stream = stream_chat(model=ScriptedModel([]), messages=user("go"))
    parts = await collect(stream.full_stream)
    with pytest.raises(Exception) as raised:
        await stream.finish_reason
    assert (parts[-1]["type"], parts[-1]["error"]["name"], type(raised.value).__name__) == (
        "error", "ScriptExhaustedError", "ScriptExhaustedError"
    )


async def test_a_model_failure_in_generate_text_raises():
    with pytest.raises(Exception, match="script ran out"):
        await generate_text(model=ScriptedModel([]), messages=user("go"))


async def test_bad_max_steps_is_rejected():
    with pytest.raises(ValueError, match="max_steps"):
        await generate_text(model=ScriptedModel([]), messages=user("go"), max_steps=0)


async def test_an_unknown_option_is_rejected():
    with pytest.raises(TypeError):
        await generate_text(model=ScriptedModel([]), messages=user("go"), max_stepz=3)
