"""Sub-agents: client-mode approval at any depth, child checkpoint keys, and real restarts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from runs.runtime import agent_tool, generate_text, stream_chat
from runs.runtime.durable import (
    APPROVAL_TOKEN_DENIAL_REASON,
    create_approval_signer,
    create_in_memory_session_store,
    resume_from_checkpoint,
)
from runs.runtime.stores import is_descendant_key, is_sub_agent_key, root_run_id
from runs.runtime.testing import ScriptedModel
from tests.environment import REPO_ROOT
from tests.runs.runtime.scripting import Counter, call, calls, collect, counting_tool, says, user


def coder(shell: Counter, *, script=None, name="coder"):
    script = script or [calls(call("run_shell", "s1", command="pytest")), says("fixed")]
    return agent_tool(name=name, model=ScriptedModel(script), max_steps=3,
                      tools={"run_shell": counting_tool(shell, needs_approval=True)})


def parent_model(*after):
    return ScriptedModel([calls(call("coder", "t1", prompt="fix the test")), *after])


async def test_a_gated_call_in_a_sub_agent_suspends_the_parent_with_its_agent_path():
    store = create_in_memory_session_store()
    result = await generate_text(model=parent_model(), messages=user("go"), tools={"coder": coder(Counter())},
                                 max_steps=3, session={"store": store, "run_id": "run-7"})
    assert result.finish_reason == "suspended"
    assert [(r["tool_name"], r["agent_path"]) for r in result.pending_approvals] == [("run_shell", ["coder"])]


async def test_the_child_checkpoints_under_the_parent_run_agent_and_tool_call():
    store = create_in_memory_session_store()
    await generate_text(model=parent_model(), messages=user("go"), tools={"coder": coder(Counter())},
                        max_steps=3, session={"store": store, "run_id": "run-7"})
    child = store.load("run-7::coder#t1")
    assert (child["status"], child["agent_path"]) == ("suspended", ["coder"])


async def test_resuming_the_parent_forwards_the_verdict_and_the_child_continues():
    store, shell = create_in_memory_session_store(), Counter()
    first = await generate_text(model=parent_model(), messages=user("go"), tools={"coder": coder(shell)},
                                max_steps=3, session={"store": store, "run_id": "run-7"})
    resumed_child = coder(shell, script=[says("fixed it")])
    result = await resume_from_checkpoint(
        store, "run-7", model=ScriptedModel([says("The coder fixed it.")]), tools={"coder": resumed_child}, max_steps=3,
        approval_responses=[{"approval_id": first.pending_approvals[0]["approval_id"], "approved": True}],
    )
    tool_result = result.messages[2]["content"][0]
    assert (shell.count, result.text, tool_result["output"]) == (1, "The coder fixed it.", "fixed it")


async def test_an_unanswered_child_call_is_denied_by_default():
    store, shell = create_in_memory_session_store(), Counter()
    await generate_text(model=parent_model(), messages=user("go"), tools={"coder": coder(shell)},
                        max_steps=3, session={"store": store, "run_id": "run-7"})
    await resume_from_checkpoint(store, "run-7", model=ScriptedModel([says("ok")]),
                                 tools={"coder": coder(shell, script=[says("could not")])}, max_steps=3)
    child_tool_result = store.load("run-7::coder#t1")["messages"][2]["content"][0]
    assert (shell.count, child_tool_result["is_error"]) == (0, True)


async def test_without_a_session_a_gated_child_call_is_an_error_result_for_the_parent():
    shell = Counter()
    result = await generate_text(model=parent_model(says("I could not.")), messages=user("go"),
                                 tools={"coder": coder(shell)}, max_steps=3)
    output = result.messages[2]["content"][0]
    assert (shell.count, output["is_error"], result.text) == (0, True, "I could not.")
    assert "durable session" in output["output"]


async def test_a_server_mode_approver_is_inherited_by_the_child():
    shell = Counter()
    seen = []
    result = await generate_text(model=parent_model(says("done")), messages=user("go"), tools={"coder": coder(shell)},
                                 max_steps=3, approve_tool_call=lambda request: seen.append(request) or True)
    assert (shell.count, result.text, seen[0]["agent_path"]) == (1, "done", ["coder"])


async def test_a_childs_token_binds_the_root_run():
    store = create_in_memory_session_store()
    signer = create_approval_signer(secret="s")
    result = await generate_text(model=parent_model(), messages=user("go"), tools={"coder": coder(Counter())},
                                 max_steps=3, session={"store": store, "run_id": "run-7"}, approval_signer=signer)
    assert signer.verify(result.pending_approvals[0]["token"])["run_id"] == "run-7"


async def test_a_forged_token_for_a_child_call_is_denied():
    store, shell = create_in_memory_session_store(), Counter()
    signer = create_approval_signer(secret="s")
    first = await generate_text(model=parent_model(), messages=user("go"), tools={"coder": coder(shell)},
                                max_steps=3, session={"store": store, "run_id": "run-7"}, approval_signer=signer)
    request = first.pending_approvals[0]
    await resume_from_checkpoint(
        store, "run-7", model=ScriptedModel([says("ok")]), tools={"coder": coder(shell, script=[says("no")])}, max_steps=3,
        approval_signer=signer,
        approval_responses=[{"approval_id": request["approval_id"], "approved": True,
                             "token": create_approval_signer(secret="x").sign(request, run_id="run-7")}],
    )
    child_result = store.load("run-7::coder#t1")["messages"][2]["content"][0]
    assert (shell.count, child_result["output"]) == (0, APPROVAL_TOKEN_DENIAL_REASON)


async def test_parallel_calls_to_the_same_sub_agent_checkpoint_apart():
    store = create_in_memory_session_store()
    model = ScriptedModel([calls(call("coder", "t1", prompt="a"), call("coder", "t2", prompt="b"))])
    child = agent_tool(name="coder", max_steps=3, tools={"run_shell": counting_tool(Counter(), needs_approval=True)},
                       model=ScriptedModel([calls(call("run_shell", "s1")), calls(call("run_shell", "s2"))]))
    result = await generate_text(model=model, messages=user("go"), tools={"coder": child}, max_steps=3,
                                 session={"store": store, "run_id": "r"})
    assert sorted(store.list()) == ["r", "r::coder#t1", "r::coder#t2"]
    assert len(result.pending_approvals) == 2


async def test_a_sibling_that_ran_beside_a_suspending_sub_agent_runs_again_on_resume():
    store, shell, sibling = create_in_memory_session_store(), Counter(), Counter()
    model = ScriptedModel([calls(call("coder", "t1", prompt="fix"), call("note", "n1"))])
    tools = {"coder": coder(shell), "note": counting_tool(sibling)}
    first = await generate_text(model=model, messages=user("go"), tools=tools, max_steps=3,
                                session={"store": store, "run_id": "r"})
    assert "tool" not in [m["role"] for m in store.load("r")["messages"]]  # no tool message for a suspended step
    await resume_from_checkpoint(store, "r", model=ScriptedModel([says("ok")]),
                                 tools={"coder": coder(shell, script=[says("fixed")]), "note": counting_tool(sibling)},
                                 approval_responses=[{"approval_id": first.pending_approvals[0]["approval_id"], "approved": True}])
    assert (shell.count, sibling.count) == (1, 2)


async def test_a_sub_agents_usage_counts_toward_the_parent_run():
    shell = Counter()
    child = agent_tool(name="coder", max_steps=3, tools={"run_shell": counting_tool(shell)},
                       model=ScriptedModel([says("done", input_tokens=100, output_tokens=50)]))
    result = await generate_text(model=ScriptedModel([calls(call("coder", "t1", prompt="x")), says("ok")]),
                                 messages=user("go"), tools={"coder": child}, max_steps=3)
    assert result.usage["total_tokens"] == 15 + 150 + 15


def _run(*args: str) -> dict:
    completed = subprocess.run([sys.executable, "-m", "tests.runs.runtime.nested_agents", *args], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=60, check=True)
    return json.loads(completed.stdout)


def test_nested_approval_at_depth_three_survives_a_real_restart(tmp_path):
    store_file, effects = str(tmp_path / "store.json"), tmp_path / "effects.txt"
    suspended = _run("suspend", store_file, str(effects))
    request = suspended["pending"][0]
    assert (suspended["finish_reason"], request["agent_path"], effects.exists()) == (
        "suspended", ["planner", "coder", "operator"], False)
    done = _run("resume", store_file, str(effects), request["approval_id"], request["token"])
    assert (done["finish_reason"], done["text"], effects.read_text()) == ("stop", "root: all done", "make test\n")
    assert "root::planner#p1::coder#k1::operator#o1" in done["runs"]


async def test_a_childs_request_never_settles_a_parent_call_with_the_same_id():
    store, shell = create_in_memory_session_store(), Counter()
    # The child's gated call reuses the parent's tool call id "t1".
    first = await generate_text(model=parent_model(), messages=user("go"), max_steps=3,
                                tools={"coder": coder(shell, script=[calls(call("run_shell", "t1"))])},
                                session={"store": store, "run_id": "r"})
    result = await resume_from_checkpoint(
        store, "r", model=ScriptedModel([says("ok")]), tools={"coder": coder(shell, script=[says("gave up")])}, max_steps=3,
        approval_responses=[{"approval_id": first.pending_approvals[0]["approval_id"], "approved": False}],
    )
    assert result.messages[2]["content"][0]["output"] == "gave up"


@pytest.mark.parametrize(("key", "root"), [
    ("r1", "r1"),
    ("r1::coder#c1", "r1"),
    ("r1::coder#c1::tester#c2", "r1"),
    ("team::nightly", "team::nightly"),  # a run id may hold '::' (1-200 of [A-Za-z0-9._:-])
    ("team::nightly::coder#c1::tester#c2", "team::nightly"),
    ("job#5::coder#c1", "job#5"),  # a runtime user's run id may hold '#'
])
def test_a_keys_root_run_is_its_key_up_to_the_first_sub_agent_segment(key, root):
    assert (root_run_id(key), is_sub_agent_key(key)) == (root, key != root)


def test_a_run_whose_id_extends_another_is_not_its_sub_agent():
    store = create_in_memory_session_store()
    for key in ("team", "team::nightly", "team::coder#c1", "team::coder#c1::tester#c2"):
        store.save({"version": 1, "run_id": key, "step_id": f"{key}#0", "step_index": 0, "status": "running",
                    "messages": [user("go")], "usage": {"input_tokens": 0, "output_tokens": 0}, "created_at": 0})
    listed = [checkpoint["run_id"] for checkpoint in store.checkpoint_list("team", include_sub_agents=True)]
    assert listed == ["team", "team::coder#c1", "team::coder#c1::tester#c2"]
    assert is_descendant_key("team::coder#c1::tester#c2", "team::coder#c1")


# ---------------------------------------------------------------- the sub-agent's parts in its parent's stream


async def streamed(tools, model, **options):
    return await collect(stream_chat(model=model, messages=user("go"), tools=tools, max_steps=3, **options).full_stream)


async def test_a_sub_agents_text_and_tool_calls_stream_in_its_parent_with_its_agent_path():
    child = agent_tool(name="coder", model=ScriptedModel([calls(call("run_shell", "s1", command="ls")), says("done")]),
                       max_steps=3, tools={"run_shell": counting_tool(Counter())})
    parts = await streamed({"coder": child}, parent_model(says("ok")))
    theirs = [(p["type"], p.get("tool_name") or p.get("text")) for p in parts if p.get("agent_path") == ["coder"]]
    assert {("tool-call", "run_shell"), ("tool-result", "run_shell"), ("text-delta", "done")} <= set(theirs)


async def test_the_top_level_agents_parts_carry_no_agent_path():
    parts = await streamed({"coder": coder(Counter(), script=[says("done")])}, parent_model(says("ok")))
    top = [p for p in parts if "agent_path" not in p]
    assert [p["type"] for p in top][0] == "start" and ("tool-call", "coder") in [
        (p["type"], p.get("tool_name")) for p in top]


async def test_a_sub_agents_leg_envelope_is_not_repeated_in_its_parent():
    parts = await streamed({"coder": coder(Counter(), script=[says("done")])}, parent_model(says("ok")))
    assert [p["type"] for p in parts if p["type"] in ("start", "finish")] == ["start", "finish"]


async def test_a_grandchilds_parts_carry_the_whole_path():
    inner = agent_tool(name="tester", model=ScriptedModel([says("green")]), max_steps=1, tools={})
    middle = agent_tool(name="coder", model=ScriptedModel([calls(call("tester", "t2", prompt="run")), says("done")]),
                        max_steps=3, tools={"tester": inner})
    parts = await streamed({"coder": middle}, parent_model(says("ok")))
    assert {"type": "text-delta", "text": "green", "agent_path": ["coder", "tester"]} in parts
