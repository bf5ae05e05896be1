"""Approval-gated tools: server mode, client mode, settling on resume, and the signed trail."""

from __future__ import annotations

import pytest

from runs.runtime import CLIENT_TOOL_NO_RESULT, generate_text, stream_chat, tool
from runs.runtime.approvals import DENIED_BY_DEFAULT_REASON
from runs.runtime.durable import (
    APPROVAL_TOKEN_DENIAL_REASON,
    create_approval_signer,
    create_in_memory_session_store,
    resume_from_checkpoint,
    resume_stream_from_checkpoint,
)
from runs.runtime.testing import ScriptedModel
from tests.runs.runtime.scripting import (
    Counter,
    FakeClock,
    call,
    calls,
    collect,
    counting_tool,
    make_deps,
    says,
    types,
    user,
)

SECRET = "test-approval-secret"


def gated_tools(pay: Counter, lookup: Counter | None = None):
    tools = {"pay": counting_tool(pay, needs_approval=True)}
    if lookup is not None:
        tools["lookup"] = counting_tool(lookup)
    return tools


async def suspend(store, *, pay=None, signer=None, deps=None, run_id="r1", extra_calls=()):
    pay = pay or Counter()
    model = ScriptedModel([calls(call("pay", "c1", amount=42), *extra_calls)])
    return await generate_text(
        model=model, messages=user("pay it"), tools=gated_tools(pay, Counter()), max_steps=3,
        session={"store": store, "run_id": run_id}, approval_signer=signer, deps=deps,
    )


def verdict(result_or_request, approved=True, **extra):
    request = result_or_request.pending_approvals[0] if hasattr(result_or_request, "pending_approvals") else result_or_request
    response = {"approval_id": request["approval_id"], "approved": approved, **extra}
    if "token" in request and "token" not in extra:
        response["token"] = request["token"]
    return response


async def resume(store, responses, *, pay, signer=None, run_id="r1", **options):
    return await resume_from_checkpoint(
        store, run_id, model=ScriptedModel([says("finished")]), tools=gated_tools(pay, Counter()), max_steps=3,
        approval_responses=responses, approval_signer=signer, **options,
    )


async def signed_suspension(*, clock=None):
    """Run r1 suspended on a signed request to pay: its store, the pay counter, the signer and the result."""
    store, pay = create_in_memory_session_store(), Counter()
    signer = create_approval_signer(secret=SECRET, clock=clock)
    return store, pay, signer, await suspend(store, pay=pay, signer=signer)


def last_tool_output(result, tool_call_id="c1"):
    for message in reversed(result.messages):
        if message["role"] == "tool":
            for part in message["content"]:
                if part["tool_call_id"] == tool_call_id:
                    return part
    raise AssertionError("no tool result")


# ---------------------------------------------------------------- server mode


async def test_server_mode_runs_an_approved_call():
    pay = Counter()
    result = await generate_text(model=ScriptedModel([calls(call("pay", "c1", amount=5)), says("paid")]), messages=user("pay"),
                                 tools=gated_tools(pay), max_steps=3, approve_tool_call=lambda request: True)
    assert (pay.count, result.text) == (1, "paid")


async def test_server_mode_denial_is_an_error_result_and_the_tool_never_runs():
    pay = Counter()
    result = await generate_text(model=ScriptedModel([calls(call("pay", "c1", amount=5)), says("ok")]), messages=user("pay"),
                                 tools=gated_tools(pay), max_steps=3, approve_tool_call=lambda request: False)
    assert (pay.count, last_tool_output(result)["is_error"]) == (0, True)


async def test_the_server_approver_receives_the_full_request_with_a_minted_approval_id():
    seen = []
    deps, _ = make_deps(prefix="appr")

    async def approve(request):
        seen.append(request)
        return True

    await generate_text(model=ScriptedModel([calls(call("pay", "c1", amount=5)), says("ok")]), messages=user("pay"),
                        tools=gated_tools(Counter()), max_steps=3, approve_tool_call=approve, deps=deps)
    assert seen == [{"approval_id": "appr-1", "tool_call_id": "c1", "tool_name": "pay", "input": {"amount": 5}}]


async def test_needs_approval_may_decide_per_input():
    pay = Counter()
    big_only = counting_tool(pay, needs_approval=lambda tool_input: tool_input["amount"] > 100)
    model = ScriptedModel([calls(call("pay", "c1", amount=5), call("pay", "c2", amount=500)), says("ok")])
    await generate_text(model=model, messages=user("pay"), tools={"pay": big_only}, max_steps=3,
                        approve_tool_call=lambda request: False)
    assert pay.inputs == [{"amount": 5}]


# ---------------------------------------------------------------- client mode


async def test_client_mode_suspends_with_the_pending_request():
    store = create_in_memory_session_store()
    result = await suspend(store)
    checkpoint = store.load("r1")
    assert (result.finish_reason, [r["tool_call_id"] for r in result.pending_approvals]) == ("suspended", ["c1"])
    assert (checkpoint["status"], checkpoint["pending_approvals"]) == ("suspended", result.pending_approvals)


async def test_approval_id_is_distinct_from_the_tool_call_id():
    deps, _ = make_deps(prefix="appr")
    result = await suspend(create_in_memory_session_store(), deps=deps)
    assert result.pending_approvals[0]["approval_id"] == "appr-1"


async def test_nothing_in_a_suspended_step_runs_before_the_verdict():
    pay, lookup = Counter(), Counter()
    model = ScriptedModel([calls(call("pay", "c1", amount=1), call("lookup", "c2"))])
    await generate_text(model=model, messages=user("go"), tools=gated_tools(pay, lookup), max_steps=3,
                        session={"store": create_in_memory_session_store(), "run_id": "r1"})
    assert (pay.count, lookup.count) == (0, 0)


async def test_a_suspended_stream_emits_the_approval_request_and_finishes_suspended():
    stream = stream_chat(model=ScriptedModel([calls(call("pay", "c1", amount=1))]), messages=user("go"),
                         tools=gated_tools(Counter()), max_steps=3,
                         session={"store": create_in_memory_session_store(), "run_id": "r1"})
    parts = await collect(stream.full_stream)
    assert types(parts)[-2:] == ["tool-approval-request", "finish"] and parts[-1]["finish_reason"] == "suspended"
    assert parts[-2]["approval"]["tool_name"] == "pay"


async def test_an_approved_verdict_runs_the_call_on_resume():
    store, pay = create_in_memory_session_store(), Counter()
    first = await suspend(store, pay=pay)
    result = await resume(store, [verdict(first)], pay=pay)
    assert (pay.inputs, result.text) == ([{"amount": 42}], "finished")


async def test_a_denied_verdict_is_an_error_result_with_its_reason():
    store, pay = create_in_memory_session_store(), Counter()
    first = await suspend(store, pay=pay)
    result = await resume(store, [verdict(first, approved=False, reason="Too much.")], pay=pay)
    assert (pay.count, last_tool_output(result)) == (0, {
        "type": "tool_result", "tool_call_id": "c1", "tool_name": "pay", "output": "Too much.", "is_error": True})


async def test_an_unanswered_call_is_denied_by_default():
    store, pay = create_in_memory_session_store(), Counter()
    await suspend(store, pay=pay)
    result = await resume(store, [], pay=pay)
    assert (pay.count, last_tool_output(result)["is_error"]) == (0, True)


async def test_the_model_never_sees_an_unanswered_tool_call():
    store = create_in_memory_session_store()
    await suspend(store)
    model = ScriptedModel([says("ok")])
    await resume_from_checkpoint(store, "r1", model=model, tools=gated_tools(Counter()), max_steps=3)
    history = model.requests[0]["messages"]
    assert history[-1]["role"] == "tool" and history[-1]["content"][0]["tool_call_id"] == "c1"


async def test_siblings_of_a_suspended_call_run_on_resume():
    store, pay, lookup = create_in_memory_session_store(), Counter(), Counter()
    model = ScriptedModel([calls(call("pay", "c1", amount=1), call("lookup", "c2"))])
    first = await generate_text(model=model, messages=user("go"), tools=gated_tools(pay, lookup), max_steps=3,
                                session={"store": store, "run_id": "r1"})
    await resume_from_checkpoint(store, "r1", model=ScriptedModel([says("ok")]), tools=gated_tools(pay, lookup),
                                 approval_responses=[verdict(first)])
    assert (pay.count, lookup.count) == (1, 1)


async def test_settled_results_stream_before_the_first_step_of_the_new_leg():
    store = create_in_memory_session_store()
    first = await suspend(store)
    stream = resume_stream_from_checkpoint(store, "r1", model=ScriptedModel([says("ok")]), tools=gated_tools(Counter()),
                                           approval_responses=[verdict(first)])
    parts = await collect(stream.full_stream)
    assert types(parts)[:4] == ["start", "tool-approval-verdict", "tool-result", "step-start"]
    assert parts[3]["step_index"] == 1


async def resumed_parts(store, responses, **options):
    stream = resume_stream_from_checkpoint(store, "r1", model=ScriptedModel([says("ok")]), tools=gated_tools(Counter()),
                                           approval_responses=responses, **options)
    return await collect(stream.full_stream)


def verdict_parts(parts):
    return [{k: v for k, v in part.items() if k != "type"} for part in parts if part["type"] == "tool-approval-verdict"]


async def test_an_approved_verdict_is_told_with_who_gave_it_before_the_result():
    store = create_in_memory_session_store()
    first = await suspend(store)
    parts = await resumed_parts(store, [verdict(first, decided_by="rita")])
    assert verdict_parts(parts) == [{"approval_id": first.pending_approvals[0]["approval_id"], "tool_call_id": "c1",
                                     "approved": True, "reason": "", "decided_by": "rita", "edited": False}]


async def test_a_denied_verdict_is_told_with_its_reason():
    store = create_in_memory_session_store()
    first = await suspend(store)
    parts = await resumed_parts(store, [verdict(first, approved=False, reason="Too much.", decided_by="rita")])
    (told,) = verdict_parts(parts)
    assert (told["approved"], told["reason"], told["decided_by"]) == (False, "Too much.", "rita")


async def test_an_unanswered_call_is_told_denied_by_nobody():
    store = create_in_memory_session_store()
    await suspend(store)
    (told,) = verdict_parts(await resumed_parts(store, []))
    assert (told["approved"], told["reason"], told["decided_by"]) == (False, DENIED_BY_DEFAULT_REASON, None)


async def test_an_approval_whose_token_fails_is_told_as_a_denial_by_nobody():
    store, pay, signer, first = await signed_suspension()
    forged = create_approval_signer(secret="attacker").sign(first.pending_approvals[0], run_id="r1")
    parts = await resumed_parts(store, [verdict(first, token=forged, decided_by="rita")], approval_signer=signer)
    (told,) = verdict_parts(parts)
    assert (told["approved"], told["reason"], told["decided_by"]) == (False, APPROVAL_TOKEN_DENIAL_REASON, None)


async def test_a_settled_step_is_checkpointed_so_a_later_crash_never_reruns_the_approved_call():
    store, pay = create_in_memory_session_store(), Counter()
    first = await suspend(store, pay=pay)
    await resume(store, [verdict(first)], pay=pay)
    assert [m["role"] for m in store.load("r1")["messages"]] == ["user", "assistant", "tool", "assistant"]


async def test_a_resumed_suspension_is_not_a_recovery():
    store = create_in_memory_session_store()
    first = await suspend(store)
    stream = resume_stream_from_checkpoint(store, "r1", model=ScriptedModel([says("ok")]), tools=gated_tools(Counter()),
                                           approval_responses=[verdict(first)])
    assert "recovery" not in types(await collect(stream.full_stream))


async def test_a_client_tool_suspends_and_resumes_with_the_placeholder():
    store = create_in_memory_session_store()
    picker = tool(description="browser-side")
    first = await generate_text(model=ScriptedModel([calls(call("pick", "c1"))]), messages=user("go"),
                                tools={"pick": picker}, max_steps=3, session={"store": store, "run_id": "r1"})
    result = await resume_from_checkpoint(store, "r1", model=ScriptedModel([says("ok")]), tools={"pick": picker})
    assert (first.finish_reason, first.pending_approvals) == ("suspended", [])
    assert last_tool_output(result) == {"type": "tool_result", "tool_call_id": "c1", "tool_name": "pick",
                                        "output": CLIENT_TOOL_NO_RESULT, "is_error": True}


async def test_a_gated_call_in_a_crashed_decision_asks_again_instead_of_denying():
    store = create_in_memory_session_store()
    # A checkpointed decision (status running) whose tool phase never ran.
    store.save({"version": 1, "run_id": "r1", "step_id": "r1#0", "step_index": 0, "status": "running",
                "messages": [*user("go"), {"role": "assistant", "content": [call("pay", "c1", amount=3)]}],
                "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}, "created_at": 0})
    result = await resume_from_checkpoint(store, "r1", model=ScriptedModel([]), tools=gated_tools(Counter()))
    assert (result.finish_reason, [r["tool_call_id"] for r in result.pending_approvals]) == ("suspended", ["c1"])


async def test_a_plain_call_settles_verdicts_named_by_tool_call_id():
    pay = Counter()
    first = await generate_text(model=ScriptedModel([calls(call("pay", "c1", amount=9))]), messages=user("go"),
                                tools=gated_tools(pay), max_steps=3)
    result = await generate_text(model=ScriptedModel([says("paid")]), messages=first.messages, tools=gated_tools(pay),
                                 max_steps=3, approval_responses=[{"approval_id": "x", "tool_call_id": "c1", "approved": True}])
    assert (pay.count, result.text) == (1, "paid")


# ---------------------------------------------------------------- signed approvals


async def test_signed_requests_carry_tokens_everywhere():
    store = create_in_memory_session_store()
    signer = create_approval_signer(secret=SECRET)
    stream = stream_chat(model=ScriptedModel([calls(call("pay", "c1", amount=1))]), messages=user("go"),
                         tools=gated_tools(Counter()), max_steps=3, session={"store": store, "run_id": "r1"},
                         approval_signer=signer)
    parts = await collect(stream.full_stream)
    token = (await stream.pending_approvals)[0]["token"]
    assert parts[-2]["approval"]["token"] == token == store.load("r1")["pending_approvals"][0]["token"]
    assert signer.verify(token)["run_id"] == "r1"


async def test_a_valid_token_authorizes_the_call():
    store, pay, signer, first = await signed_suspension()
    await resume(store, [verdict(first)], pay=pay, signer=signer)
    assert pay.count == 1


@pytest.mark.parametrize("token", [None, "v1.garbage.mac", "not-a-token"])
async def test_a_missing_or_garbled_token_becomes_a_denial(token):
    store, pay, signer, first = await signed_suspension()
    response = verdict(first)
    response.pop("token")
    if token is not None:
        response["token"] = token
    result = await resume(store, [response], pay=pay, signer=signer)
    assert (pay.count, last_tool_output(result)["output"]) == (0, APPROVAL_TOKEN_DENIAL_REASON)


async def test_a_forged_token_becomes_a_denial():
    store, pay, signer, first = await signed_suspension()
    forged = create_approval_signer(secret="attacker").sign(first.pending_approvals[0], run_id="r1")
    result = await resume(store, [verdict(first, token=forged)], pay=pay, signer=signer)
    assert (pay.count, last_tool_output(result)["output"]) == (0, APPROVAL_TOKEN_DENIAL_REASON)


async def test_a_token_for_another_call_cannot_authorize_this_one():
    store, pay, signer, first = await signed_suspension()
    other = signer.sign({**first.pending_approvals[0], "approval_id": "other"}, run_id="r1")
    result = await resume(store, [verdict(first, token=other)], pay=pay, signer=signer)
    assert (pay.count, last_tool_output(result)["output"]) == (0, APPROVAL_TOKEN_DENIAL_REASON)


@pytest.mark.parametrize(("age_ms", "is_honoured"), [(59_999, True), (60_000, False)],
                         ids=["younger-than-the-max-age", "as-old-as-the-max-age"])
async def test_a_token_is_honoured_only_while_younger_than_the_max_age(age_ms, is_honoured):
    clock = FakeClock()
    store, pay, signer, first = await signed_suspension(clock=clock)
    clock.advance(age_ms)
    result = await resume(store, [verdict(first)], pay=pay, signer=signer, approval_max_age_ms=60_000)
    denied = last_tool_output(result)["output"] == APPROVAL_TOKEN_DENIAL_REASON
    assert (pay.count, denied) == (int(is_honoured), not is_honoured)


async def test_a_token_bound_to_another_run_becomes_a_denial():
    store, pay, signer = create_in_memory_session_store(), Counter(), create_approval_signer(secret=SECRET)
    deps, _ = make_deps(prefix="same")  # the same approval ids in both runs
    await suspend(store, pay=pay, signer=signer, run_id="run-a", deps=deps)
    deps_b, _ = make_deps(prefix="same")
    second = await suspend(store, pay=pay, signer=signer, run_id="run-b", deps=deps_b)
    token_a = store.load("run-a")["pending_approvals"][0]["token"]
    result = await resume(store, [verdict(second, token=token_a)], pay=pay, signer=signer, run_id="run-b")
    assert (pay.count, last_tool_output(result)["output"]) == (0, APPROVAL_TOKEN_DENIAL_REASON)


async def test_a_denial_needs_no_token():
    store, pay, signer, first = await signed_suspension()
    result = await resume(store, [{"approval_id": first.pending_approvals[0]["approval_id"], "approved": False,
                                   "reason": "No."}], pay=pay, signer=signer)
    assert last_tool_output(result)["output"] == "No."


async def test_a_throwing_signer_is_logged_and_its_requests_are_denied_on_resume():
    class Broken:
        def sign(self, request, *, run_id=None):
            raise RuntimeError("hsm offline")

        def verify(self, token, *, max_age_ms=None):
            return None

    store, pay = create_in_memory_session_store(), Counter()
    deps, log = make_deps()
    first = await suspend(store, pay=pay, signer=Broken(), deps=deps)
    result = await resume(store, [verdict(first)], pay=pay, signer=Broken())
    assert ("token" not in first.pending_approvals[0], len(log.records)) == (True, 1)
    assert (pay.count, last_tool_output(result)["output"]) == (0, APPROVAL_TOKEN_DENIAL_REASON)


async def test_a_plain_call_checks_the_token_names_the_same_call():
    signer = create_approval_signer(secret=SECRET)
    pay = Counter()
    first = await generate_text(model=ScriptedModel([calls(call("pay", "c1", amount=1), call("pay", "c2", amount=2))]),
                                messages=user("go"), tools=gated_tools(pay), max_steps=3, approval_signer=signer)
    by_call = {r["tool_call_id"]: r for r in first.pending_approvals}
    # Echo c1's token for both calls: only c1 is authorized.
    responses = [{"approval_id": by_call[c]["approval_id"], "tool_call_id": c, "approved": True,
                  "token": by_call["c1"]["token"]} for c in ("c1", "c2")]
    await generate_text(model=ScriptedModel([says("ok")]), messages=first.messages, tools=gated_tools(pay),
                        max_steps=3, approval_responses=responses, approval_signer=signer)
    assert pay.inputs == [{"amount": 1}]
