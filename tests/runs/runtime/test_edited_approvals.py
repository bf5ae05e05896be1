"""Edit, then approve (SERVICE.md, edited_input): a call runs with another input only when the server signed the
edit as the next revision of its request; the runtime never honours an unsigned edit. Pure: no Django."""

from __future__ import annotations

import pytest

from runs.runtime import Effect, tool
from runs.runtime.approvals import sign_edit
from runs.runtime.durable import (
    APPROVAL_TOKEN_DENIAL_REASON,
    create_approval_signer,
    create_in_memory_session_store,
    resume_from_checkpoint,
    resume_stream_from_checkpoint,
)
from runs.runtime.effect_ledger import InMemoryEffectLedger
from runs.runtime.effects import business_operation_id, effect_fingerprint
from runs.runtime.providers.base import tool_result_text
from runs.runtime.testing import ScriptedModel
from tests.runs.runtime.scripting import Counter, collect, counting_tool, says
from tests.runs.runtime.test_approvals import SECRET, suspend, verdict

EDITED = {"amount": 40}


async def suspended_on_pay():
    """Run r1 waiting on a signed request to pay 42: its store, the pay counter, the signer and the request."""
    store, pay = create_in_memory_session_store(), Counter()
    signer = create_approval_signer(secret=SECRET)
    result = await suspend(store, pay=pay, signer=signer)
    return store, pay, signer, result.pending_approvals[0]


def edited_verdict(request, signer, *, edited_input=EDITED, by="rita", run_id="r1", **extra):
    """An approval of ``request`` with the server's edit token, as the service hands it to the leg."""
    token = sign_edit(request, edited_input=edited_input, edited_by=by, signer=signer, run_id=run_id)
    return {**verdict(request, decided_by=by), "edit_token": token, **extra}


async def resume_with(store, pay, signer, responses, **options):
    return await resume_from_checkpoint(
        store, "r1", model=ScriptedModel([says("finished")]), tools={"pay": counting_tool(pay, needs_approval=True)},
        max_steps=3, approval_responses=responses, approval_signer=signer, **options,
    )


def tool_part(result, tool_call_id="c1"):
    return next(part for message in result.messages if message["role"] == "tool" for part in message["content"]
                if part["tool_call_id"] == tool_call_id)


async def test_a_server_signed_edit_runs_the_tool_with_the_edited_input():
    store, pay, signer, request = await suspended_on_pay()
    await resume_with(store, pay, signer, [edited_verdict(request, signer)])
    assert pay.inputs == [EDITED]


async def test_the_history_keeps_the_models_call_and_its_result_carries_the_edit_and_who():
    store, pay, signer, request = await suspended_on_pay()
    result = await resume_with(store, pay, signer, [edited_verdict(request, signer)])
    call = next(part for message in result.messages if message["role"] == "assistant"
                for part in message["content"] if part.get("type") == "tool_call")
    assert call["input"] == {"amount": 42}
    assert tool_part(result)["edit"] == {"input": EDITED, "by": "rita"}


async def test_the_verdict_part_says_edited_and_the_result_part_carries_the_edit():
    store, pay, signer, request = await suspended_on_pay()
    stream = resume_stream_from_checkpoint(
        store, "r1", model=ScriptedModel([says("ok")]), tools={"pay": counting_tool(pay, needs_approval=True)},
        approval_responses=[edited_verdict(request, signer)], approval_signer=signer)
    parts = await collect(stream.full_stream)
    told = next(part for part in parts if part["type"] == "tool-approval-verdict")
    result = next(part for part in parts if part["type"] == "tool-result")
    assert (told["approved"], told["edited"], told["edit"]) == (True, True, {"input": EDITED, "by": "rita"})
    assert result["edit"] == {"input": EDITED, "by": "rita"}


async def test_an_unsigned_edit_smuggled_beside_a_valid_token_is_denied_and_nothing_runs():
    store, pay, signer, request = await suspended_on_pay()
    result = await resume_with(store, pay, signer, [verdict(request, edited_input={"amount": 9999})])
    assert pay.inputs == []
    assert tool_part(result)["output"] == APPROVAL_TOKEN_DENIAL_REASON


async def test_an_edited_input_other_than_the_one_the_server_signed_is_denied():
    store, pay, signer, request = await suspended_on_pay()
    response = {**edited_verdict(request, signer), "edited_input": {"amount": 9999}}  # the server signed 40
    await resume_with(store, pay, signer, [response])
    assert pay.inputs == []


async def test_an_edit_signed_with_another_key_is_denied():
    store, pay, signer, request = await suspended_on_pay()
    forged = create_approval_signer(secret="attacker")
    response = {**verdict(request), "edit_token": sign_edit(request, edited_input={"amount": 9999}, edited_by="eve",
                                                            signer=forged, run_id="r1")}
    await resume_with(store, pay, signer, [response])
    assert pay.inputs == []


@pytest.mark.parametrize("change", [{"approval_id": "another"}, {"tool_call_id": "c9"}, {"input": {"amount": 1}}])
async def test_an_edit_signed_for_another_request_is_denied(change):
    store, pay, signer, request = await suspended_on_pay()
    other = {**request, **change}
    response = {**verdict(request), "edit_token": sign_edit(other, edited_input=EDITED, edited_by="rita",
                                                            signer=signer, run_id="r1")}
    await resume_with(store, pay, signer, [response])
    assert pay.inputs == []


async def test_an_edit_bound_to_another_run_is_denied():
    store, pay, signer, request = await suspended_on_pay()
    await resume_with(store, pay, signer, [edited_verdict(request, signer, run_id="r2")])
    assert pay.inputs == []


async def test_the_original_requests_token_is_no_edit_token():
    store, pay, signer, request = await suspended_on_pay()
    await resume_with(store, pay, signer, [{**verdict(request), "edit_token": request["token"]}])
    assert pay.inputs == []


async def test_without_a_signer_an_edit_is_never_honoured():
    store, pay = create_in_memory_session_store(), Counter()
    first = await suspend(store, pay=pay)
    await resume_from_checkpoint(
        store, "r1", model=ScriptedModel([says("finished")]), tools={"pay": counting_tool(pay, needs_approval=True)},
        max_steps=3, approval_responses=[verdict(first, edited_input={"amount": 9999})])
    assert pay.inputs == []


async def test_the_model_reads_the_input_the_tool_ran_with_and_who_edited_it():
    text = tool_result_text({"output": "paid", "edit": {"input": {"amount": 40}, "by": "rita"}})
    assert "rita" in text and '{"amount": 40}' in text and text.endswith("paid")


def keyed_pay_tool(pay: Counter):
    effect = Effect(operation_key=lambda given: f"pay-{given['amount']}")
    return tool(description="Pay.", execute=pay, needs_approval=True, effect=effect)


async def test_the_ledger_keys_and_fingerprints_the_edited_input_and_names_who_edited():
    store, pay, signer, request = await suspended_on_pay()
    ledger = InMemoryEffectLedger()
    await resume_from_checkpoint(
        store, "r1", model=ScriptedModel([says("finished")]), tools={"pay": keyed_pay_tool(pay)}, max_steps=3,
        approval_responses=[edited_verdict(request, signer)], approval_signer=signer, effect_ledger=ledger)
    entry = ledger.get(business_operation_id("pay", "pay-40"))
    assert (entry["input"], entry["fingerprint"]) == (EDITED, effect_fingerprint("pay", EDITED))
    assert entry["approval"]["edited_by"] == "rita"
    assert ledger.get(business_operation_id("pay", "pay-42")) is None
