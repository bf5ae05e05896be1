"""Checkpoints at every step boundary, and resuming a run in another leg."""

from __future__ import annotations

import pytest

from runs.runtime import generate_text, tool, total_tokens_exceed
from runs.runtime.durable import (
    CheckpointNotFoundError,
    StoreUnavailableError,
    create_in_memory_session_store,
    resume_from_checkpoint,
    resume_stream_from_checkpoint,
)
from runs.runtime.testing import ScriptedModel
from tests.runs.runtime.scripting import (
    Counter,
    Crash,
    FakeClock,
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


def _dies(request):
    raise Crash()


async def _leg_that_dies_after(store, steps: int, run_id: str = "r1") -> None:
    """A leg that closes ``steps`` tool steps, then 'dies' in the next model call, leaving a running checkpoint."""
    model = ScriptedModel([calls(call("ping", f"c{i}")) for i in range(steps)] + [_dies])
    with pytest.raises(Crash):
        await generate_text(model=model, messages=user("go"), tools={"ping": counting_tool(Counter())},
                            max_steps=steps + 1, session={"store": store, "run_id": run_id})


def two_tool_steps() -> ScriptedModel:
    return ScriptedModel([calls(call("ping", "c1")), calls(call("ping", "c2")), says("finished")])


async def test_a_checkpoint_closes_every_step():
    store = RecordingStore()
    await generate_text(model=two_tool_steps(), messages=user("go"), tools={"ping": counting_tool(Counter())},
                        max_steps=5, session={"store": store, "run_id": "r1"})
    # Each tool step saves its decision, then its boundary; the final step completes the run.
    assert store.statuses("r1") == [(0, "running"), (0, "running"), (1, "running"), (1, "running"), (2, "completed")]


async def test_checkpoint_fields_follow_the_schema():
    store = create_in_memory_session_store()
    clock = FakeClock(now=1234)
    deps, _ = make_deps(clock=clock)
    await generate_text(model=two_tool_steps(), messages=user("go"), tools={"ping": counting_tool(Counter())},
                        max_steps=5, session={"store": store, "run_id": "r1"}, deps=deps)
    checkpoint = store.load("r1")
    assert {k: checkpoint[k] for k in ("version", "run_id", "step_id", "step_index", "status", "created_at")} == {
        "version": 1, "run_id": "r1", "step_id": "r1#2", "step_index": 2, "status": "completed", "created_at": 1234,
    }


async def test_checkpoint_usage_is_cumulative():
    store = create_in_memory_session_store()
    await generate_text(model=two_tool_steps(), messages=user("go"), tools={"ping": counting_tool(Counter())},
                        max_steps=5, session={"store": store, "run_id": "r1"})
    assert store.load("r1")["usage"] == {"input_tokens": 30, "output_tokens": 15, "total_tokens": 45}


async def test_result_carries_the_run_id_and_a_minted_one_comes_from_deps():
    deps, _ = make_deps(prefix="run")
    result = await generate_text(model=ScriptedModel([says("hi")]), messages=user("go"),
                                 tools={"ping": counting_tool(Counter())}, session={"store": create_in_memory_session_store()},
                                 deps=deps)
    assert result.run_id == "run-1"


async def test_a_single_turn_call_has_no_run_id_and_saves_nothing():
    store = RecordingStore()
    result = await generate_text(model=ScriptedModel([says("hi")]), messages=user("go"), session={"store": store, "run_id": "r1"})
    assert (result.run_id, store.saved) == (None, [])


async def test_without_a_session_nothing_is_saved_and_there_is_no_run_id():
    result = await generate_text(model=two_tool_steps(), messages=user("go"), tools={"ping": counting_tool(Counter())}, max_steps=5)
    assert result.run_id is None


async def test_history_in_an_earlier_checkpoint_is_never_mutated():
    store = RecordingStore()
    await generate_text(model=two_tool_steps(), messages=user("go"), tools={"ping": counting_tool(Counter())},
                        max_steps=5, session={"store": store, "run_id": "r1"})
    assert [len(cp["messages"]) for cp in store.saved] == [2, 3, 4, 5, 6]


async def test_the_models_decision_is_checkpointed_before_any_tool_runs():
    store = create_in_memory_session_store()
    seen = []

    def look(tool_input, ctx):
        seen.append(store.load("r1")["messages"][-1])
        return "ok"

    await generate_text(model=ScriptedModel([calls(call("look", "c1")), says("ok")]), messages=user("go"),
                        tools={"look": tool(execute=look)}, max_steps=3, session={"store": store, "run_id": "r1"})
    assert seen[0]["role"] == "assistant" and seen[0]["content"][0]["tool_call_id"] == "c1"


async def test_a_failing_save_is_logged_and_the_run_goes_on():
    class Broken:
        def save(self, checkpoint):
            raise ConnectionError("db down, password=hunter2")

        def load(self, run_id):
            return None

    deps, log = make_deps()
    result = await generate_text(model=two_tool_steps(), messages=user("go"), tools={"ping": counting_tool(Counter())},
                                 max_steps=5, session={"store": Broken(), "run_id": "r1"}, deps=deps)
    assert result.finish_reason == "stop"
    assert len(log.records) == 5 and all(r.levelname == "ERROR" for r in log.records)
    assert not any("hunter2" in message for message in log.messages)


async def test_async_store_methods_are_awaited():
    class AsyncStore:
        def __init__(self):
            self.inner = create_in_memory_session_store()

        async def save(self, checkpoint):
            self.inner.save(checkpoint)

        async def load(self, run_id):
            return self.inner.load(run_id)

    store = AsyncStore()
    await _leg_that_dies_after(store, 1)
    resumed = await resume_from_checkpoint(store, "r1", model=ScriptedModel([says("later")]), tools={"ping": counting_tool(Counter())})
    assert resumed.text == "later"


# ---------------------------------------------------------------- resuming


async def _crash_in_tool(store, run_id="r1", counter=None):
    """A leg whose process 'dies' while the tool of step 1 runs."""
    counter = counter or Counter()
    state = {"n": 0}

    def flaky(tool_input, ctx):
        state["n"] += 1
        if state["n"] == 2:
            raise Crash()
        counter(tool_input, ctx)
        return "ok"

    model = ScriptedModel([calls(call("ping", "c1")), calls(call("ping", "c2")), says("never reached")])
    with pytest.raises(Crash):
        await generate_text(model=model, messages=user("go"), tools={"ping": tool(execute=flaky)}, max_steps=5,
                            session={"store": store, "run_id": run_id})
    return counter


async def test_a_crash_in_the_tool_phase_resumes_without_asking_the_model_again():
    store = create_in_memory_session_store()
    counter = await _crash_in_tool(store)
    model = ScriptedModel([says("finished")])
    result = await resume_from_checkpoint(store, "r1", model=model, tools={"ping": counting_tool(counter)}, max_steps=5)
    assert (result.text, model.calls, [i for i in counter.inputs]) == ("finished", 1, [{}, {}])
    assert model.requests[0]["messages"][3]["content"][0]["tool_call_id"] == "c2"


async def test_a_resumed_decision_keeps_its_tool_call_ids():
    store = create_in_memory_session_store()
    await _crash_in_tool(store)
    ids = []
    ping = tool(execute=lambda i, ctx: ids.append(ctx.tool_call_id))
    await resume_from_checkpoint(store, "r1", model=ScriptedModel([says("ok")]), tools={"ping": ping}, max_steps=5)
    assert ids == ["c2"]


async def test_a_resumed_running_leg_opens_with_one_recovery_part():
    store = create_in_memory_session_store()
    await _crash_in_tool(store)
    stream = resume_stream_from_checkpoint(store, "r1", model=ScriptedModel([says("ok")]),
                                           tools={"ping": counting_tool(Counter())}, max_steps=5)
    parts = await collect(stream.full_stream)
    assert types(parts)[:3] == ["start", "recovery", "step-start"]
    assert (parts[1]["restarted_step_index"], types(parts).count("recovery")) == (1, 1)


async def test_a_crash_during_the_model_call_reruns_that_step():
    store = create_in_memory_session_store()

    def dies(request):
        raise Crash()

    model = ScriptedModel([calls(call("ping", "c1")), dies])
    with pytest.raises(Crash):
        await generate_text(model=model, messages=user("go"), tools={"ping": counting_tool(Counter())}, max_steps=5,
                            session={"store": store, "run_id": "r1"})
    again = ScriptedModel([says("second try")])
    stream = resume_stream_from_checkpoint(store, "r1", model=again, tools={"ping": counting_tool(Counter())}, max_steps=5)
    parts = await collect(stream.full_stream)
    step_starts = [p["step_index"] for p in parts if p["type"] == "step-start"]
    assert (parts[1]["restarted_step_index"], step_starts, again.calls) == (1, [1], 1)


async def test_step_indices_continue_across_legs():
    store = create_in_memory_session_store()
    await _leg_that_dies_after(store, 2)
    stream = resume_stream_from_checkpoint(store, "r1", model=ScriptedModel([says("ok")]), tools={"ping": counting_tool(Counter())})
    parts = await collect(stream.full_stream)
    assert [p["step_index"] for p in parts if p["type"] == "step-start"] == [2]
    assert store.load("r1")["step_id"] == "r1#2"


async def test_each_leg_reports_its_own_usage_while_the_checkpoint_sums_the_run():
    store = create_in_memory_session_store()
    await _leg_that_dies_after(store, 1)
    resumed = await resume_from_checkpoint(store, "r1", model=ScriptedModel([says("ok", input_tokens=1, output_tokens=1)]),
                                           tools={"ping": counting_tool(Counter())})
    assert resumed.usage["total_tokens"] == 2 and store.load("r1")["usage"]["total_tokens"] == 17


async def test_budgets_apply_to_the_whole_run_across_legs():
    store = create_in_memory_session_store()
    loop = [calls(call("ping", f"c{i}")) for i in range(10)]
    await _leg_that_dies_after(store, 2)  # 30 tokens
    model = ScriptedModel(loop)
    resumed = await resume_from_checkpoint(store, "r1", model=model, tools={"ping": counting_tool(Counter())},
                                           max_steps=10, stop_when=total_tokens_exceed(40))
    assert (resumed.finish_reason, model.calls) == ("stop-condition", 1)


async def test_resuming_an_unknown_run_raises_checkpoint_not_found():
    with pytest.raises(CheckpointNotFoundError) as raised:
        await resume_from_checkpoint(create_in_memory_session_store(), "ghost", model=ScriptedModel([]))
    assert raised.value.run_id == "ghost"


async def test_the_streaming_resume_of_an_unknown_run_is_an_error_part_and_rejected_awaitables():
    stream = resume_stream_from_checkpoint(create_in_memory_session_store(), "ghost", model=ScriptedModel([]))
    parts = await collect(stream.full_stream)
    assert [p["error"]["name"] for p in parts] == ["CheckpointNotFoundError"]
    with pytest.raises(CheckpointNotFoundError):
        await stream.usage
    with pytest.raises(CheckpointNotFoundError):
        await stream.finish_reason


async def test_an_unreachable_store_is_not_a_missing_run():
    class Down:
        def save(self, checkpoint):
            raise ConnectionError("down")

        def load(self, run_id):
            raise ConnectionError("down")

    with pytest.raises(StoreUnavailableError):
        await resume_from_checkpoint(Down(), "r1", model=ScriptedModel([]))


async def test_the_streaming_resume_names_an_unreachable_store():
    class Down:
        def save(self, checkpoint): ...

        def load(self, run_id):
            raise TimeoutError("no answer")

    stream = resume_stream_from_checkpoint(Down(), "r1", model=ScriptedModel([]))
    parts = await collect(stream.full_stream)
    assert parts[-1]["error"]["name"] == "StoreUnavailableError"


async def test_resuming_a_completed_run_calls_no_model():
    store = create_in_memory_session_store()
    await generate_text(model=ScriptedModel([calls(call("ping", "c1")), says("the answer")]), messages=user("go"),
                        tools={"ping": counting_tool(Counter())}, max_steps=3, session={"store": store, "run_id": "r1"})
    model = ScriptedModel([])
    result = await resume_from_checkpoint(store, "r1", model=model, tools={"ping": counting_tool(Counter())})
    assert (result.text, result.finish_reason, model.calls) == ("the answer", "stop", 0)


async def test_a_run_stopped_by_the_runaway_guard_is_completed():
    store = create_in_memory_session_store()
    loop = [calls(call("ping", f"c{i}")) for i in range(5)]
    await generate_text(model=ScriptedModel(loop), messages=user("go"), tools={"ping": counting_tool(Counter())},
                        max_steps=2, session={"store": store, "run_id": "r1"})
    assert (store.load("r1")["status"], store.load("r1")["step_index"]) == ("completed", 1)


async def test_a_resume_takes_no_messages():
    with pytest.raises(TypeError, match="messages"):
        await resume_from_checkpoint(create_in_memory_session_store(), "r1", model=ScriptedModel([]), messages=[])


async def test_the_escape_hatch_continues_the_run_with_a_supplied_tool_result():
    store = create_in_memory_session_store()
    client_tool = tool(description="runs in the browser")  # no execute
    first = await generate_text(model=ScriptedModel([calls(call("pick_file", "c1"))]), messages=user("go"),
                                tools={"pick_file": client_tool}, max_steps=3, session={"store": store, "run_id": "r1"})
    assert first.finish_reason == "suspended"
    checkpoint = store.load("r1")
    answered = [*checkpoint["messages"], {"role": "tool", "content": [
        {"type": "tool_result", "tool_call_id": "c1", "tool_name": "pick_file", "output": "a.txt", "is_error": False}]}]
    model = ScriptedModel([says("You picked a.txt.")])
    result = await generate_text(model=model, messages=answered, tools={"pick_file": client_tool}, max_steps=3,
                                 session={"store": store, "run_id": "r1"})
    assert (result.text, store.load("r1")["step_index"]) == ("You picked a.txt.", 1)


async def test_a_resume_over_budget_stops_before_calling_the_model():
    store = create_in_memory_session_store()
    await _leg_that_dies_after(store, 2)  # 30 tokens
    model = ScriptedModel([says("never")])
    resumed = await resume_from_checkpoint(store, "r1", model=model, tools={"ping": counting_tool(Counter())},
                                           max_steps=10, stop_when=total_tokens_exceed(20))
    assert (resumed.finish_reason, model.calls) == ("stop-condition", 0)
