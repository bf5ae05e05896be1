"""The same expense is paid once, whatever the number of runs asking: the demo's pay_expense is keyed by the
business operation (``f"{expense_id}-v1"``), so a second run replays the first one's receipt, waits while it is
being paid, shares its review, or is refused when it asks for another amount. On both databases (the suite's
PostgreSQL pass runs these too)."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime

import pytest
from django.db import connection

from approvals.models import ApprovalRequest
from demo.agents import reimbursement_agent
from demo.models import SandboxPayment
from runs.agents import AgentDefinition
from runs.models import Effect, Run
from runs.runtime.exceptions import EffectStateChanged
from runs.runtime.testing import ScriptedModel
from runs.selectors import run_latest_messages
from runs.services.lifecycle import run_start
from runs.services.resolution import effect_resolve
from runs.stores import get_store
from runs.stores.ledger import DatabaseEffectLedger
from tests.factories import REIMBURSE, make_paid_run, make_suspended_run, verdict

pytestmark = pytest.mark.django_db(transaction=True)

OPERATION = "pay_expense:exp-1042-v1"


def overpaying_agent(*, leg=None) -> AgentDefinition:
    """The reimbursement agent with a model that asks to pay exp-1042 99.00 EUR: the same business key, another
    request."""
    agent = reimbursement_agent(leg=leg)

    def policy(request):
        results = [part for message in request["messages"] if message["role"] == "tool" for part in message["content"]]
        if not results:
            return {"content": [{"type": "tool_call", "tool_name": "pay_expense", "input": {
                "expense_id": "exp-1042", "amount": "99.00", "currency": "EUR", "recipient": "Ada Lovelace"}}]}
        return {"content": [{"type": "text", "text": f"Result: {results[-1]['output']}"}]}

    return AgentDefinition(name="overpaying", model=ScriptedModel([policy] * 4), tools=agent.tools, max_steps=4)


def malformed_agent(*, leg=None) -> AgentDefinition:
    """The reimbursement agent with a model whose payment call gives the amount as a number and no recipient."""
    agent = reimbursement_agent(leg=leg)

    def policy(request):
        results = [part for message in request["messages"] if message["role"] == "tool" for part in message["content"]]
        if not results:
            return {"content": [{"type": "tool_call", "tool_name": "pay_expense", "input": {
                "expense_id": "exp-1042", "amount": 84.2, "currency": "EUR"}}]}
        return {"content": [{"type": "text", "text": f"Result: {results[-1]['output']}"}]}

    return AgentDefinition(name="malformed", model=ScriptedModel([policy] * 4), tools=agent.tools, max_steps=4)


def noting_agent(*, leg=None) -> AgentDefinition:
    """The reimbursement agent with a model that pays exp-1042 as asked plus a memo: an input that differs only
    where the payment's fingerprint does not look (expense, amount, currency, recipient)."""
    agent = reimbursement_agent(leg=leg)

    def policy(request):
        results = [part for message in request["messages"] if message["role"] == "tool" for part in message["content"]]
        if not results:
            return {"content": [{"type": "tool_call", "tool_name": "pay_expense", "input": {
                "expense_id": "exp-1042", "amount": "84.20", "currency": "EUR", "recipient": "Ada Lovelace",
                "memo": "March travel"}}]}
        return {"content": [{"type": "text", "text": f"Result: {results[-1]['output']}"}]}

    return AgentDefinition(name="noting", model=ScriptedModel([policy] * 4), tools=agent.tools, max_steps=4)


def final_text(run_id: str) -> str:
    last = run_latest_messages(run=Run.objects.get(run_id=run_id))[-1]
    return " ".join(part.get("text", "") for part in last["content"]) if isinstance(last["content"], list) else last["content"]



def console_page(user, path: str) -> str:
    """The console page at /console/``path``/ as ``user`` sees it (``""`` is the queue)."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.get(f"/console/{path}/".replace("//", "/")).content.decode()


def paid_then_asked_again(drain_runs, settings, agent: str, run_id: str) -> ApprovalRequest:
    """r-a paid exp-2077; then ``agent`` (a factory of this module) is asked the same, under ``run_id``."""
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, agent: f"tests.runs.execution.test_business_operations.{agent}_agent"}
    make_paid_run(drain_runs, "r-a")
    run_start(agent=agent, messages=REIMBURSE, run_id=run_id)
    drain_runs()
    return ApprovalRequest.objects.get(run__run_id=run_id)

def test_two_runs_paying_the_same_expense_make_one_payment(drain_runs):
    make_paid_run(drain_runs, "r-a")
    make_paid_run(drain_runs, "r-b")
    [payment] = SandboxPayment.objects.all()
    assert Run.objects.get(run_id="r-b").status == Run.Status.COMPLETED
    said = re.search(r"already paid by run r-a at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC: 84\.20 EUR to Ada Lovelace, "
                     r"transaction (tx-\w+)\. Nothing was paid again\.", final_text("r-b"))
    assert said is not None, final_text("r-b")
    assert said.group(2) == payment.transaction_id
    paid_at = datetime.strptime(said.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    assert abs((paid_at - payment.created_at).total_seconds()) < 2  # when r-a's payment was recorded


def test_the_operation_belongs_to_the_run_that_opened_it(drain_runs):
    make_paid_run(drain_runs, "r-a")
    make_paid_run(drain_runs, "r-b")
    effect = Effect.objects.get(operation_id=OPERATION)
    assert effect.run.run_id == "r-a"
    assert list(effect.transitions.filter(via="replay").values_list("evidence", flat=True)) == [{"run_id": "r-b"}]


def test_a_second_run_started_while_the_first_waits_for_approval_pays_nothing(drain_runs):
    first = make_suspended_run(drain_runs, "r-a")
    second = make_suspended_run(drain_runs, "r-b")
    verdict(second)
    verdict(first)
    drain_runs()
    assert SandboxPayment.objects.count() == 1
    assert {run.status for run in Run.objects.all()} == {Run.Status.COMPLETED}


def test_two_runs_racing_on_a_new_key_meet_at_one_row(monkeypatch):
    """r-a has inserted the entry and not committed yet when r-b opens the same key: r-b waits for the database
    (the row's unique key on PostgreSQL, the write lock on SQLite), then finds r-a's entry instead of a second one."""
    asked = {"expense_id": "exp-1042", "amount": "84.20", "currency": "EUR", "recipient": "Ada Lovelace"}
    fingerprint = reimbursement_agent().tools["pay_expense"].fingerprint_of("pay_expense", asked)
    for run_id in ("r-a", "r-b"):
        run = run_start(agent="reimbursement", messages=REIMBURSE, run_id=run_id)
        Run.objects.filter(pk=run.pk).update(owner_epoch=1)
    inserted, release = threading.Event(), threading.Event()
    record = DatabaseEffectLedger._record

    def record_then_hold(self, effect, *args, **kwargs):
        record(self, effect, *args, **kwargs)
        if self.fence.run_id == "r-a":  # inside r-a's transaction, its row written
            inserted.set()
            release.wait(20)

    monkeypatch.setattr(DatabaseEffectLedger, "_record", record_then_hold)
    opened, failed = {}, {}

    def open_for(run_id):
        try:
            opened[run_id] = get_store("effects").fenced(run_id, 1).open_sync({
                "operation_id": OPERATION, "run_id": run_id, "tool_call_id": f"call-{run_id}",
                "tool_name": "pay_expense", "input": asked, "fingerprint": fingerprint})
        except Exception as exc:  # noqa: BLE001 - the assertion below names it
            failed[run_id] = repr(exc)
        finally:
            connection.close()

    first = threading.Thread(target=open_for, args=("r-a",))
    first.start()
    assert inserted.wait(20)
    second = threading.Thread(target=open_for, args=("r-b",))
    second.start()
    second.join(0.5)
    still_waiting = second.is_alive()
    release.set()
    first.join(20)
    second.join(20)
    assert failed == {} and still_waiting
    assert (opened["r-a"]["run_id"], opened["r-b"]["run_id"]) == ("r-a", "r-a")
    assert opened["r-b"]["tool_call_id"] == "call-r-a"
    [effect] = Effect.objects.filter(operation_id=OPERATION)
    assert effect.run.run_id == "r-a" and effect.transitions.count() == 1


def test_a_run_meeting_the_operation_while_it_is_open_waits_and_then_replays(drain_runs):
    run_a = run_start(agent="reimbursement", messages=REIMBURSE, run_id="r-a")
    ledger = get_store("effects").fenced("r-a", 1)
    Run.objects.filter(pk=run_a.pk).update(owner_epoch=1)
    asked = {"expense_id": "exp-1042", "amount": "84.20", "currency": "EUR", "recipient": "Ada Lovelace"}
    fingerprint = reimbursement_agent().tools["pay_expense"].fingerprint_of("pay_expense", asked)
    ledger.open_sync({"operation_id": OPERATION, "run_id": "r-a", "tool_call_id": "call-x", "tool_name": "pay_expense",
                      "input": asked, "fingerprint": fingerprint})
    ledger.advance_sync(OPERATION, expected="proposed", status="attempted", via="tool", changes={"attempts": 1})
    Run.objects.filter(pk=run_a.pk).update(status=Run.Status.SUSPENDED)  # r-a is not to be run by the drain
    verdict(make_suspended_run(drain_runs, "r-b"))
    drain_runs()
    waiting = Run.objects.get(run_id="r-b")
    assert (waiting.status, waiting.waits_for_operation) == (Run.Status.SUSPENDED, OPERATION)
    assert SandboxPayment.objects.count() == 0
    receipt = {"transaction_id": "tx-outside", "operation_id": OPERATION, "expense_id": "exp-1042", "amount": "84.20",
               "currency": "EUR", "recipient": "Ada Lovelace", "status": "committed"}
    ledger.advance_sync(OPERATION, expected="attempted", status="committed", via="tool", changes={"output": receipt})
    assert Run.objects.get(run_id="r-b").status == Run.Status.QUEUED
    drain_runs()
    assert Run.objects.get(run_id="r-b").status == Run.Status.COMPLETED
    assert "transaction tx-outside" in final_text("r-b") and SandboxPayment.objects.count() == 0


def test_a_run_meeting_an_operation_that_needs_review_goes_on_once_a_person_resolves_it(
    drain_runs, monkeypatch, reviewer
):
    first = make_suspended_run(drain_runs, "r-a")
    verdict(first)
    monkeypatch.setenv("DEUZ_SANDBOX_PAYMENTS", "commit-then-timeout,reads-unavailable")
    drain_runs()
    assert Run.objects.get(run_id="r-a").status == Run.Status.NEEDS_REVIEW
    monkeypatch.delenv("DEUZ_SANDBOX_PAYMENTS")
    verdict(make_suspended_run(drain_runs, "r-b"))
    drain_runs()
    second = Run.objects.get(run_id="r-b")
    assert (second.status, second.waits_for_operation) == (Run.Status.NEEDS_REVIEW, OPERATION)
    paid = SandboxPayment.objects.get().receipt()
    effect_resolve(run_id="r-a", operation_id=OPERATION, action="commit", reason="The provider's books show it.",
                   receipt=paid, user=reviewer)
    drain_runs()
    assert set(Run.objects.values_list("status", flat=True)) == {Run.Status.COMPLETED}
    assert SandboxPayment.objects.count() == 1


def test_another_amount_under_the_same_key_is_a_visible_conflict(drain_runs, settings, reviewer):
    request = paid_then_asked_again(drain_runs, settings, "overpaying", "r-c")
    page = console_page(reviewer, f"r-c/{request.approval_id}")
    assert "Recorded for other arguments" in page and "this request would be refused as a conflict" in page
    verdict(request)
    drain_runs()
    assert "performed by run r-a for a different request" in final_text("r-c")
    assert SandboxPayment.objects.count() == 1
    conflicts = Effect.objects.get(operation_id=OPERATION).transitions.filter(via="conflict")
    assert conflicts.count() == 1


def test_a_malformed_payment_is_an_error_naming_its_fields_and_asks_no_reviewer(drain_runs, settings):
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS,
                            "malformed": "tests.runs.execution.test_business_operations.malformed_agent"}
    run_start(agent="malformed", messages=REIMBURSE, run_id="r-m")
    drain_runs()
    assert Run.objects.get(run_id="r-m").status == Run.Status.COMPLETED
    assert not ApprovalRequest.objects.exists() and not Effect.objects.exists()
    said = final_text("r-m")
    assert "amount: 84.2 is not of type 'string'" in said and "'recipient' is a required property" in said


def test_the_fenced_ledger_refuses_a_move_by_another_run(drain_runs):
    make_paid_run(drain_runs, "r-a")
    intruder = run_start(agent="reimbursement", messages=REIMBURSE, run_id="r-z")
    Run.objects.filter(pk=intruder.pk).update(owner_epoch=1)
    with pytest.raises(EffectStateChanged):
        get_store("effects").fenced("r-z", 1).advance_sync(OPERATION, expected="verified", status="needs_review",
                                                          via="verify")


def test_the_metrics_count_the_cross_run_replay(drain_runs, reviewer_client):
    make_paid_run(drain_runs, "r-a")
    make_paid_run(drain_runs, "r-b")
    metrics = reviewer_client.get("/api/metrics/").json()
    assert (metrics["cross_run_replays"], metrics["duplicate_effects"]) == (1, 0)


def test_the_console_shows_the_existing_payment_before_anyone_approves(drain_runs, reviewer):
    make_paid_run(drain_runs, "r-a")
    request = make_suspended_run(drain_runs, "r-b")
    assert request.operation_id == OPERATION
    page = console_page(reviewer, f"r-b/{request.approval_id}")
    assert "Already performed by run" in page and "r-a" in page and "nothing is performed again" in page
    assert "would be refused as a conflict" not in page  # the same request: replayed, not refused
    assert "tx-" in page
    queue = console_page(reviewer, "")
    assert "Already performed by run" in queue


def test_the_console_judges_a_conflict_by_the_fingerprint_as_the_ledger_does(drain_runs, reviewer, settings):
    request = paid_then_asked_again(drain_runs, settings, "noting", "r-n")
    page = console_page(reviewer, f"r-n/{request.approval_id}")
    assert "Already performed by run" in page and "would be refused as a conflict" not in page
    verdict(request)
    drain_runs()
    assert "'replayed_from'" in final_text("r-n") and SandboxPayment.objects.count() == 1  # replayed, as shown


def test_the_console_names_the_other_runs_asking_for_the_same_operation(drain_runs, reviewer):
    make_suspended_run(drain_runs, "r-a")
    second = make_suspended_run(drain_runs, "r-b")
    page = console_page(reviewer, f"r-b/{second.approval_id}")
    assert "Also asked by" in page and "r-a" in page and "the first approved is performed" in page
