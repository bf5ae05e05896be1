"""Business operations (``Effect(operation_key=...)``), pure: the runtime with the in-memory ledger shared by two
runs, a pretend provider, no Django. One operation per key whatever the number of runs; only the run that opened
it attempts it; another run replays, waits, shares its review, or is refused with a conflict."""

from __future__ import annotations

import pytest

from runs.runtime import Effect, generate_text, tool
from runs.runtime.durable import EffectHeldElsewhere, EffectNeedsReview, InMemoryEffectLedger, InMemorySessionStore
from tests.runs.runtime.ledger import Provider, paying_model


def keyed_pay_tool(provider: Provider, *, needs_approval: bool = False):
    """The provider's pay tool, keyed by the recipient's invoice: every run paying invoice-7 is one operation."""
    return tool(
        name="pay", description="Pay someone.",
        input_schema={"type": "object", "properties": {"amount": {"type": "string"}, "recipient": {"type": "string"}}},
        execute=provider.pay, needs_approval=needs_approval,
        effect=Effect(reconcile=provider.lookup, verify=provider.verify, operation_key=lambda tool_input: "invoice-7-v1"),
    )


async def pay(provider, ledger, *, run_id, amount="84.20", **options):
    return await generate_text(
        model=paying_model(amount=amount), messages=[{"role": "user", "content": "pay Ada"}],
        tools={"pay": keyed_pay_tool(provider)}, max_steps=4,
        session={"store": InMemorySessionStore(), "run_id": run_id},
        effect_ledger=ledger.fenced(run_id, ledger.claim(run_id)), **options,
    )


def tool_results(result):
    return [part for message in result.messages if message["role"] == "tool" for part in message["content"]]


async def test_the_operation_id_is_the_business_key_not_the_tool_call():
    provider, ledger = Provider(), InMemoryEffectLedger()
    await pay(provider, ledger, run_id="r1")
    assert provider.calls == ["pay:invoice-7-v1"]
    assert ledger.get("pay:invoice-7-v1")["run_id"] == "r1"


async def test_a_second_run_gets_the_stored_result_replayed_and_pays_nothing():
    provider, ledger = Provider(), InMemoryEffectLedger()
    await pay(provider, ledger, run_id="r1")
    second = await pay(provider, ledger, run_id="r2")
    assert provider.calls == ["pay:invoice-7-v1"]  # called once, by the first run
    output = tool_results(second)[0]["output"]
    assert output["transaction_id"] == "tx-1"
    assert output["replayed_from"]["run_id"] == "r1"


async def test_the_replay_is_an_event_on_the_entry_that_names_the_run_it_served():
    provider, ledger = Provider(), InMemoryEffectLedger()
    await pay(provider, ledger, run_id="r1")
    await pay(provider, ledger, run_id="r2")
    replays = [move for move in ledger.get("pay:invoice-7-v1")["transitions"] if move["via"] == "replay"]
    assert [move["evidence"] for move in replays] == [{"run_id": "r2"}]


async def test_another_amount_under_the_same_key_is_a_conflict_and_nothing_is_paid():
    provider, ledger = Provider(), InMemoryEffectLedger()
    await pay(provider, ledger, run_id="r1")
    second = await pay(provider, ledger, run_id="r2", amount="99.00")
    result = tool_results(second)[0]
    assert result["is_error"] and "performed by run r1 for a different request" in result["output"]
    assert provider.calls == ["pay:invoice-7-v1"]


async def test_a_run_that_meets_an_open_operation_waits_and_never_attempts_it():
    provider, ledger = Provider(), InMemoryEffectLedger()
    opener = ledger.fenced("r1", ledger.claim("r1"))
    opener.open({"operation_id": "pay:invoice-7-v1", "run_id": "r1", "tool_call_id": "call-1", "tool_name": "pay",
                 "fingerprint": keyed_pay_tool(provider).fingerprint_of("pay", {"amount": "84.20", "recipient": "Ada"}),
                 "input": {"amount": "84.20", "recipient": "Ada"}})
    with pytest.raises(EffectHeldElsewhere) as held:
        await pay(provider, ledger, run_id="r2")
    assert (held.value.operation_id, held.value.opened_by) == ("pay:invoice-7-v1", "r1")
    assert provider.calls == []


async def test_a_run_that_meets_an_operation_needing_review_needs_review_too():
    provider, ledger = Provider(), InMemoryEffectLedger()
    provider.mode, provider.reads_fail = "commit-then-timeout", True
    with pytest.raises(EffectNeedsReview):
        await pay(provider, ledger, run_id="r1")
    provider.mode, provider.reads_fail = "normal", False
    with pytest.raises(EffectNeedsReview) as review:
        await pay(provider, ledger, run_id="r2")
    assert review.value.opened_by == "r1"
    assert provider.calls == ["pay:invoice-7-v1"]


async def test_a_run_that_may_not_make_the_call_replays_nothing():
    provider, ledger = Provider(), InMemoryEffectLedger()
    await pay(provider, ledger, run_id="r1")
    gated = tool(name="pay", input_schema={"type": "object"}, execute=provider.pay, needs_approval=True,
                 effect=Effect(operation_key=lambda tool_input: "invoice-7-v1"))
    second = await generate_text(
        model=paying_model(), messages=[{"role": "user", "content": "pay Ada"}], tools={"pay": gated}, max_steps=4,
        session={"store": InMemorySessionStore(), "run_id": "r2"}, effect_ledger=ledger.fenced("r2", ledger.claim("r2")),
        approve_tool_call=lambda request: False,
    )
    result = tool_results(second)[0]
    assert result["is_error"] and "transaction_id" not in str(result["output"])


async def test_an_empty_operation_key_is_an_error_result_not_a_call():
    provider, ledger = Provider(), InMemoryEffectLedger()
    unkeyed = tool(name="pay", input_schema={"type": "object"}, execute=provider.pay,
                   effect=Effect(operation_key=lambda tool_input: ""))
    result = await generate_text(
        model=paying_model(), messages=[{"role": "user", "content": "pay Ada"}], tools={"pay": unkeyed}, max_steps=4,
        session={"store": InMemorySessionStore(), "run_id": "r1"}, effect_ledger=ledger,
    )
    assert tool_results(result)[0]["is_error"] and "operation key" in tool_results(result)[0]["output"]
    assert provider.calls == []
