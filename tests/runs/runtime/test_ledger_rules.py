"""Each rule of the effect ledger, pure: the runtime with the in-memory ledger, a pretend provider, no Django."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from runs.runtime import Deps, Effect, agent_tool, generate_text, tool
from runs.runtime.durable import (
    EffectNeedsReview,
    EffectsStopped,
    InMemoryEffectLedger,
    InMemorySessionStore,
    OwnershipLostError,
    create_approval_signer,
    resume_from_checkpoint,
)
from runs.runtime.effects import effect_fingerprint
from runs.runtime.testing import ScriptedModel
from tests.runs.runtime.ledger import Crash, Provider, crash_at, paying_model
from tests.runs.runtime.scripting import FakeClock

SECRET = "effects-test-secret"


async def pay(provider, ledger, store, *, fault=None, run_id="r1", model=None, **options):
    deps = Deps(fault=fault) if fault else None
    return await generate_text(
        model=model or paying_model(), messages=[{"role": "user", "content": "pay Ada"}],
        tools={"pay": options.pop("pay_tool", None) or provider.pay_tool()}, max_steps=4,
        session={"store": store, "run_id": run_id}, effect_ledger=ledger, deps=deps, **options,
    )


async def resume(provider, ledger, store, *, run_id="r1", **options):
    return await resume_from_checkpoint(
        store, run_id, model=options.pop("model", None) or paying_model(),
        tools={"pay": options.pop("pay_tool", None) or provider.pay_tool()}, max_steps=4, effect_ledger=ledger,
        **options,
    )


async def crashed(provider, ledger, store, point, **options):
    with pytest.raises(Crash):
        await pay(provider, ledger, store, fault=crash_at(point), **options)


@pytest.fixture
def provider():
    """The pretend payment provider, which keeps the calls it was sent and the payments it made."""
    return Provider()


@pytest.fixture
def ledger():
    return InMemoryEffectLedger()


@pytest.fixture
def store():
    return InMemorySessionStore()


def entry(ledger, operation_id="r1:call-1"):
    return ledger.get(operation_id)


# ------------------------------------------------------------------ identity


def test_the_fingerprint_is_a_digest_of_canonical_json_of_tool_and_input():
    assert effect_fingerprint("pay", {"a": 1, "b": [1, 2]}) == effect_fingerprint("pay", {"b": [1, 2], "a": 1})
    assert effect_fingerprint("pay", {"a": 1}) != effect_fingerprint("refund", {"a": 1})


async def test_an_operation_is_named_by_run_id_and_tool_call_id_and_records_its_epoch(provider, ledger, store):
    epoch = ledger.claim("r1")
    await pay(provider, ledger.fenced("r1", epoch), store)
    assert provider.calls == ["r1:call-1"]
    assert {transition["epoch"] for transition in entry(ledger)["transitions"]} == {1}


async def test_a_custom_fingerprint_picks_what_identifies_the_request():
    provider = Provider()
    pay_tool = tool(name="pay", execute=provider.pay, effect=Effect(fingerprint=lambda given: given["recipient"]))
    assert pay_tool.fingerprint_of("pay", {"recipient": "Ada", "memo": "x"}) == pay_tool.fingerprint_of(
        "pay", {"recipient": "Ada", "memo": "y"})


# ------------------------------------------------------------------ the happy path and replay


async def test_a_call_goes_proposed_attempted_committed_verified_each_transition_timed_with_its_actor(
        provider, ledger, store):
    result = await pay(provider, ledger, store)
    transitions = entry(ledger)["transitions"]
    assert [(t["from"], t["to"]) for t in transitions] == [
        (None, "proposed"), ("proposed", "attempted"), ("attempted", "committed"), ("committed", "verified")]
    assert all(t["actor"] == "worker" and isinstance(t["at"], int) for t in transitions)
    assert result.text == "paid tx-1"


async def test_a_recorded_outcome_is_replayed_and_the_tool_not_called_again(provider, ledger, store):
    await crashed(provider, ledger, store, "after-effect-record")
    result = await resume(provider, ledger, store)
    assert (provider.calls, result.text) == (["r1:call-1"], "paid tx-1")


async def test_the_same_operation_id_with_another_request_is_a_visible_conflict(provider, ledger, store):
    ledger.open({"operation_id": "r1:call-1", "run_id": "r1", "tool_call_id": "call-1", "tool_name": "pay",
                 "fingerprint": "0" * 64, "input": {"amount": "1.00"}})
    result = await pay(provider, ledger, store)
    assert provider.calls == []
    assert "recorded for a different request" in result.text
    assert entry(ledger)["transitions"][-1]["via"] == "conflict"


# ------------------------------------------------------------------ attempted without an outcome


async def test_an_attempt_found_committed_by_reconciliation_is_recorded_and_replayed(provider, ledger, store):
    await crashed(provider, ledger, store, "after-effect-commit")
    result = await resume(provider, ledger, store)
    found = entry(ledger)
    assert (provider.calls, found["status"], found["outcome_source"]) == (["r1:call-1"], "verified", "reconciliation")
    assert result.text == "paid tx-1"


async def test_an_attempt_the_provider_never_saw_is_attempted_again_with_the_same_operation_id(provider, ledger, store):
    provider.mode = "crash-before-commit"
    with pytest.raises(Crash):
        await pay(provider, ledger, store)
    await resume(provider, ledger, store)
    assert (provider.calls, entry(ledger)["attempts"], list(provider.payments)) == (
        ["r1:call-1", "r1:call-1"], 2, ["r1:call-1"])


async def test_a_crash_before_the_attempt_is_recorded_attempts_once_on_resume_without_reconciling(
        provider, ledger, store):
    await crashed(provider, ledger, store, "before-effect")
    await resume(provider, ledger, store)
    vias = [t["via"] for t in entry(ledger)["transitions"]]
    assert (provider.calls, "reconcile" in vias) == (["r1:call-1"], False)


async def test_an_owner_that_lost_the_run_before_the_call_does_not_call_the_tool(provider, ledger, store):
    paused = ledger.fenced("r1", ledger.claim("r1"))

    def taken_over_while_paused(point: str) -> None:
        if point == "before-effect":
            ledger.claim("r1")  # a new owner claims the run while this one is frozen at the point

    with pytest.raises(OwnershipLostError):
        await pay(provider, paused, store, fault=taken_over_while_paused)
    assert provider.calls == []


async def test_an_attempt_the_provider_cannot_be_asked_about_needs_review(provider, ledger, store):
    await crashed(provider, ledger, store, "after-effect-commit")
    provider.reads_fail = True
    with pytest.raises(EffectNeedsReview):
        await resume(provider, ledger, store)
    assert (provider.calls, entry(ledger)["status"]) == (["r1:call-1"], "needs_review")
    assert "cannot be reached" in entry(ledger)["transitions"][-1]["evidence"]["error"]


async def test_an_attempt_of_a_tool_without_reconcile_needs_review(provider, ledger, store):
    await crashed(provider, ledger, store, "after-effect-commit", pay_tool=provider.pay_tool(reconcile=False))
    with pytest.raises(EffectNeedsReview):
        await resume(provider, ledger, store, pay_tool=provider.pay_tool(reconcile=False))
    assert (len(provider.calls), entry(ledger)["status"]) == (1, "needs_review")


async def test_a_timeout_after_the_provider_committed_is_reconciled_in_the_same_leg(provider, ledger, store):
    provider.mode = "commit-then-timeout"
    result = await pay(provider, ledger, store)
    assert [t["to"] for t in entry(ledger)["transitions"]] == [
        "proposed", "attempted", "unknown", "committed", "verified"]
    assert result.text == "paid tx-1"


async def test_a_timeout_the_provider_has_no_record_of_needs_review_rather_than_a_second_attempt(
        provider, ledger, store):
    provider.mode = "timeout-before-commit"
    with pytest.raises(EffectNeedsReview):
        await pay(provider, ledger, store)
    assert (len(provider.calls), entry(ledger)["status"]) == (1, "needs_review")


async def test_a_refusal_is_recorded_failed_and_the_model_reads_it(provider, ledger, store):
    provider.mode = "refuse"
    result = await pay(provider, ledger, store)
    assert (entry(ledger)["status"], result.text) == ("failed", "error: The card was declined.")


async def test_a_failed_operation_is_replayed_as_its_error_without_calling_the_tool(provider, ledger, store):
    provider.mode = "refuse"
    await crashed(provider, ledger, store, "before-step-checkpoint")
    result = await resume(provider, ledger, store)
    assert (len(provider.calls), result.text) == (1, "error: The card was declined.")


# ------------------------------------------------------------------ verify


async def test_an_outcome_that_does_not_match_when_read_back_needs_review(provider, ledger, store):
    provider.tampered = True
    with pytest.raises(EffectNeedsReview):
        await pay(provider, ledger, store)
    assert entry(ledger)["status"] == "needs_review"


async def test_without_verify_an_outcome_stays_committed(provider, ledger, store):
    await pay(provider, ledger, store, pay_tool=provider.pay_tool(verify=False))
    assert entry(ledger)["status"] == "committed"


# ------------------------------------------------------------------ owner epochs


async def test_a_stale_owner_cannot_write_the_ledger(provider, ledger, store):
    stale = ledger.fenced("r1", ledger.claim("r1"))
    ledger.claim("r1")
    with pytest.raises(OwnershipLostError):
        await pay(provider, stale, store)
    assert (provider.calls, entry(ledger)) == ([], None)


# ------------------------------------------------------------------ a cancel


async def test_a_cancel_during_an_effect_waits_for_its_outcome_to_be_recorded(provider, ledger, store):
    signal, paying, released = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def slow_pay(tool_input, ctx):
        paying.set()
        await released.wait()  # the provider takes its time; the cancel comes meanwhile
        return provider.pay(tool_input, ctx)

    async def cancel_then_release():
        await paying.wait()
        signal.set()
        await asyncio.sleep(0.05)  # the leg's abort is under way; the payment has not answered yet
        released.set()

    pay_tool = dataclasses.replace(provider.pay_tool(), execute=slow_pay)
    canceller = asyncio.create_task(cancel_then_release())
    result = await pay(provider, ledger, store, pay_tool=pay_tool, signal=signal,
                       cancellation=lambda: {"by": "olga", "reason": ""})
    await canceller
    assert (result.finish_reason, provider.calls, entry(ledger)["status"]) == ("cancelled", ["r1:call-1"], "verified")


async def test_a_cancel_that_comes_with_the_models_decision_starts_no_effect(provider, ledger, store):
    signal = asyncio.Event()
    decide = paying_model().responses[0]

    def decide_then_cancel(request):
        signal.set()  # the model answers at once: no await gave the signal's watcher a turn before the tool phase
        return decide(request)

    model = ScriptedModel([decide_then_cancel, decide])
    result = await pay(provider, ledger, store, model=model, signal=signal,
                       cancellation=lambda: {"by": None, "reason": ""})
    assert (result.finish_reason, provider.calls, entry(ledger)) == ("cancelled", [], None)


# ------------------------------------------------------------------ the stop switch


async def test_while_effects_are_stopped_a_new_effect_is_not_attempted_and_the_leg_suspends(provider, ledger, store):
    ledger.stop()
    with pytest.raises(EffectsStopped, match="effects are stopped"):
        await pay(provider, ledger, store)
    assert (provider.calls, entry(ledger)["status"]) == ([], "proposed")


async def test_released_the_stopped_call_is_attempted_once(provider, ledger, store):
    ledger.stop()
    with pytest.raises(EffectsStopped):
        await pay(provider, ledger, store)
    ledger.release()
    result = await resume(provider, ledger, store)
    assert (provider.calls, result.text) == (["r1:call-1"], "paid tx-1")


async def test_while_effects_are_stopped_reconciliation_still_records_a_commit(provider, ledger, store):
    await crashed(provider, ledger, store, "after-effect-commit")
    ledger.stop()
    result = await resume(provider, ledger, store)
    assert (provider.calls, result.text) == (["r1:call-1"], "paid tx-1")


# ------------------------------------------------------------------ approvals bind to the exact proposal


async def suspended(provider, ledger, store, signer, **options):
    result = await pay(provider, ledger, store, pay_tool=provider.pay_tool(needs_approval=True),
                       approval_signer=signer, **options)
    assert result.finish_reason == "suspended"
    return result.pending_approvals[0]


def approve(request):
    return {"approval_id": request["approval_id"], "approved": True, "token": request["token"]}


async def test_an_approved_call_is_bound_to_its_approval_and_fingerprint_in_the_ledger(provider, ledger, store):
    signer = create_approval_signer(secret=SECRET)
    request = await suspended(provider, ledger, store, signer)
    await resume(provider, ledger, store, pay_tool=provider.pay_tool(needs_approval=True), approval_signer=signer,
                 approval_responses=[approve(request)])
    found = entry(ledger)
    assert found["approval"] == {"approval_id": request["approval_id"], "revision": "r1#0",
                                 "fingerprint": found["fingerprint"]}
    assert [t["to"] for t in found["transitions"]][:3] == ["proposed", "approved", "attempted"]


async def test_an_approval_signed_for_other_arguments_cannot_authorize_the_call(provider, ledger, store):
    signer = create_approval_signer(secret=SECRET)
    request = await suspended(provider, ledger, store, signer)
    forged = signer.sign({**{k: v for k, v in request.items() if k != "token"}, "input": {"amount": "9999",
                                                                                          "recipient": "Eve"}},
                         run_id="r1")
    result = await resume(provider, ledger, store, pay_tool=provider.pay_tool(needs_approval=True),
                          approval_signer=signer, approval_responses=[{**approve(request), "token": forged}])
    assert (provider.calls, entry(ledger)) == ([], None)
    assert "Approval token" in result.text


async def test_an_expired_approval_cannot_authorize_the_call(provider, ledger, store):
    clock = FakeClock()
    signer = create_approval_signer(secret=SECRET, clock=clock)
    request = await suspended(provider, ledger, store, signer)
    clock.advance(60_000)
    await resume(provider, ledger, store, pay_tool=provider.pay_tool(needs_approval=True), approval_signer=signer,
                 approval_max_age_ms=1000, approval_responses=[approve(request)])
    assert (provider.calls, entry(ledger)) == ([], None)


async def test_a_verdict_for_an_older_revision_cannot_authorize_a_newer_proposal(provider, ledger, store):
    signer = create_approval_signer(secret=SECRET)
    gated = provider.pay_tool(needs_approval=True)
    model = paying_model(again_after_error=True)
    older = await suspended(provider, ledger, store, signer, model=model)
    # Unanswered, the first proposal is denied; the model proposes again: a newer revision with its own approval.
    again = await resume(provider, ledger, store, pay_tool=gated, approval_signer=signer, model=model)
    assert again.pending_approvals[0]["tool_call_id"] == "call-2"
    await resume(provider, ledger, store, pay_tool=gated, approval_signer=signer, model=model,
                 approval_responses=[approve(older)])
    assert (provider.calls, entry(ledger, "r1:call-2")) == ([], None)


async def test_an_effect_that_happened_is_replayed_even_once_its_approval_has_expired(provider, ledger, store):
    clock = FakeClock()
    signer = create_approval_signer(secret=SECRET, clock=clock)
    gated = provider.pay_tool(needs_approval=True)
    request = await suspended(provider, ledger, store, signer)
    with pytest.raises(Crash):
        await resume(provider, ledger, store, pay_tool=gated, approval_signer=signer,
                     approval_responses=[approve(request)], deps=Deps(fault=crash_at("after-effect-commit")))
    clock.advance(60_000)
    result = await resume(provider, ledger, store, pay_tool=gated, approval_signer=signer, approval_max_age_ms=1000,
                          approval_responses=[approve(request)])
    assert (provider.calls, result.text) == (["r1:call-1"], "paid tx-1")


# ------------------------------------------------------------------ sub-agents


async def test_a_sub_agents_effect_goes_through_the_ledger_it_inherits(provider, ledger, store):
    child = agent_tool(name="payer", model=paying_model(), tools={"pay": provider.pay_tool()}, max_steps=3)
    lead = ScriptedModel([
        {"content": [{"type": "tool_call", "tool_name": "payer", "tool_call_id": "lead-1",
                      "input": {"prompt": "pay"}}]},
        {"content": [{"type": "text", "text": "done"}]},
    ])
    await generate_text(model=lead, messages=[{"role": "user", "content": "go"}], tools={"payer": child},
                        max_steps=3, session={"store": store, "run_id": "r1"}, effect_ledger=ledger)
    assert [found["operation_id"] for found in ledger.entries()] == ["r1::payer#lead-1:call-1"]


async def test_a_sub_agents_request_no_one_saw_because_of_a_crash_is_asked_again_not_denied(provider, ledger, store):
    signer = create_approval_signer(secret=SECRET)
    child = agent_tool(name="payer", model=paying_model(), tools={"pay": provider.pay_tool(needs_approval=True)},
                       max_steps=3)

    def lead():
        return ScriptedModel([{"content": [{"type": "tool_call", "tool_name": "payer", "tool_call_id": "lead-1",
                                            "input": {"prompt": "pay"}}]}, {"content": [{"type": "text",
                                                                                          "text": "done"}]}])

    options = dict(tools={"payer": child}, max_steps=3, effect_ledger=ledger, approval_signer=signer)
    with pytest.raises(Crash):  # the child stored its suspension; the parent died before storing its own
        await generate_text(model=lead(), messages=[{"role": "user", "content": "go"}],
                            session={"store": store, "run_id": "r1"}, deps=Deps(fault=crash_at("after-suspend")),
                            **options)
    result = await resume_from_checkpoint(store, "r1", model=lead(), **options)
    assert (result.finish_reason, [r["tool_name"] for r in result.pending_approvals]) == ("suspended", ["pay"])
