"""The demo agents in a thread: a follow-up turn is answered from the earlier turns' tool results, and the chat
assistant asks its own user before it sends a message through its sandboxed, ledgered outbox."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from demo.models import SandboxMessage, SandboxPayment
from runs.models import Run
from runs.runtime.engine import last_assistant_text
from runs.selectors import run_latest_messages
from runs.services.threads import thread_message_add, thread_start
from tests.factories import verdict

pytestmark = pytest.mark.django_db(transaction=True)  # the sandboxes write from the tools' own threads


def turn(thread_id: str, text: str, user, drain_runs) -> Run:
    run = thread_message_add(thread_id=thread_id, content=text, user=user)
    drain_runs()
    return Run.objects.get(pk=run.pk)


def answer_of(run: Run) -> str:
    return last_assistant_text(run_latest_messages(run=run))


def pending(run: Run) -> ApprovalRequest:
    return ApprovalRequest.objects.select_related("run").get(run=run, status=ApprovalRequest.Status.PENDING)


def paid_first_turn(users, drain_runs) -> None:
    """The owner's reimbursement thread t1, its first turn's payment approved and made."""
    thread_start(agent="reimbursement", user=users["owner"], thread_id="t1")
    first = turn("t1", "Reimburse exp-1042", users["owner"], drain_runs)
    verdict(pending(first), user=users["reviewer"])
    drain_runs()


def test_the_reimbursement_agent_answers_what_it_paid_from_the_first_turn(users, drain_runs):
    owner = users["owner"]
    paid_first_turn(users, drain_runs)
    second = turn("t1", "What did you pay?", owner, drain_runs)
    assert second.status == Run.Status.COMPLETED
    payment = SandboxPayment.objects.get()
    assert answer_of(second) == (
        "Earlier in this conversation I paid 84.20 EUR to Ada Lovelace for expense exp-1042, transaction "
        f"{payment.transaction_id}. I have paid nothing since.")
    assert not second.effects.exists()


def test_the_reimbursement_agent_pays_another_expense_named_in_a_later_turn(users, drain_runs):
    paid_first_turn(users, drain_runs)
    second = turn("t1", "Now reimburse exp-2077", users["owner"], drain_runs)
    assert pending(second).tool_input["expense_id"] == "exp-2077"


def test_the_assistant_sends_after_its_user_approves_and_then_recalls_it(users, drain_runs):
    owner = users["owner"]
    thread_start(agent="assistant", user=owner, thread_id="t1")
    first = turn("t1", "Tell Ada the build is green", owner, drain_runs)
    request = pending(first)
    assert (request.tool_name, request.tool_input) == (
        "send_message", {"to": "ada@example.test", "body": "The build is green"})
    verdict(request, user=owner)  # the run's creator decides: the agent says "creator"
    drain_runs()
    message = SandboxMessage.objects.get()
    assert answer_of(Run.objects.get(pk=first.pk)) == f"Sent to Ada Lovelace ({message.message_id})."
    second = turn("t1", "What did you send?", owner, drain_runs)
    assert answer_of(second) == (
        f"In this conversation I sent 1 message(s): to ada@example.test: \"The build is green\" ({message.message_id}).")


def test_the_assistant_answers_a_question_about_a_contact_from_the_first_turns_lookup(users, drain_runs):
    owner = users["owner"]
    thread_start(agent="assistant", user=owner, thread_id="t1")
    first = turn("t1", "Tell Grace the demo is at noon", owner, drain_runs)
    verdict(pending(first), user=owner)
    drain_runs()
    message = SandboxMessage.objects.get()
    second = turn("t1", "What is Grace's email address?", owner, drain_runs)
    assert answer_of(second) == (
        "Grace Hopper's address is grace@example.test, as I looked it up earlier in this conversation. I sent them "
        f"\"The demo is at noon\" ({message.message_id}).")
    assert not [part for message in run_latest_messages(run=second)[len(run_latest_messages(run=first)):]
                if message["role"] == "tool" for part in message["content"]]  # no new lookup: no tool result


def test_the_assistant_looks_up_a_contact_no_earlier_turn_found(users, drain_runs):
    owner = users["owner"]
    thread_start(agent="assistant", user=owner, thread_id="t1")
    turn("t1", "Hello", owner, drain_runs)
    second = turn("t1", "What is Alan's address?", owner, drain_runs)
    assert answer_of(second) == "Alan Turing's address is alan@example.test."
    assert second.status == Run.Status.COMPLETED  # a question sends nothing, so nothing waits for approval
