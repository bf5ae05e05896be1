"""Forks (runs.services.fork): a new run of the same agent from a checkpoint of another run, queued and run by the
normal worker; the origin's effects are never the fork's own, and none of its approvals or tokens carry over."""

from __future__ import annotations

import pytest

from approvals.errors import ApprovalTokenInvalid
from approvals.models import ApprovalRequest
from approvals.roles import approval_is_decidable_by
from approvals.services import approval_decide
from demo.models import SandboxPayment
from runs.errors import CheckpointNotFound, RunAlreadyExists, RunNotFound
from runs.models import Effect, Run
from runs.selectors import run_input_messages, run_latest_messages
from runs.services.fork import run_fork
from tests.factories import make_paid_run, make_suspended_run, make_user, verdict

pytestmark = pytest.mark.django_db(transaction=True)  # the sandboxes write from the tools' own threads


def tool_calls(messages, tool_name: str) -> list[dict]:
    return [part for message in messages if isinstance(message["content"], list)
            for part in message["content"] if part.get("type") == "tool_call" and part["tool_name"] == tool_name]


def journal_types(run: Run) -> list[str]:
    return [entry.decoded_part["type"] for entry in run.journal.filter(is_sentinel=False).order_by("seq")]


def test_a_fork_starts_from_the_checkpoints_history_as_a_new_queued_run_of_the_same_agent(drain_runs, reviewer):
    origin = make_paid_run(drain_runs)
    fork = run_fork(run_id=origin.run_id, step_index=0, user=reviewer)
    assert (fork.agent, fork.status, fork.created_by, fork.forked_from, fork.forked_from_step) == (
        "reimbursement", Run.Status.QUEUED, reviewer, origin, 0)
    # Step 0's latest checkpoint: the request, the lookup call and its result.
    assert [message["role"] for message in run_input_messages(fork)] == ["user", "assistant", "tool"]


def test_a_fork_after_the_payment_completes_without_paying_again(drain_runs, reviewer):
    origin = make_paid_run(drain_runs)
    fork = run_fork(run_id=origin.run_id, step_index=1, user=reviewer)
    drain_runs()
    fork.refresh_from_db()
    assert fork.status == Run.Status.COMPLETED, fork.error
    assert "tool-call" not in journal_types(fork)  # the history's payment is not called again
    assert len(tool_calls(run_latest_messages(run=fork), "pay_expense")) == 1  # the inherited one only
    assert (SandboxPayment.objects.count(), Effect.objects.count(), fork.effects.count()) == (1, 1, 0)
    assert not ApprovalRequest.objects.filter(run=fork).exists()


def test_a_fork_before_an_unpaid_payment_pays_under_the_new_run(drain_runs, reviewer):
    denied = make_suspended_run(drain_runs, "r-denied")
    verdict(denied, approved=False, reason="not yet", user=reviewer)
    drain_runs()
    fork = run_fork(run_id="r-denied", step_index=0, user=reviewer)
    drain_runs()
    request = ApprovalRequest.objects.get(run=fork, status=ApprovalRequest.Status.PENDING)
    verdict(request, user=make_user("vera", "reviewers"))
    drain_runs()
    fork.refresh_from_db()
    assert fork.status == Run.Status.COMPLETED, fork.error
    payment = Effect.objects.get(tool_name="pay_expense")
    assert (payment.run, payment.status) == (fork, Effect.Status.VERIFIED)
    assert SandboxPayment.objects.get().operation_id == payment.operation_id


def test_a_fork_before_a_made_payment_is_told_the_origin_paid_and_nothing_is_paid_twice(drain_runs, reviewer):
    origin = make_paid_run(drain_runs)
    fork = run_fork(run_id=origin.run_id, step_index=0, user=reviewer)
    drain_runs()
    verdict(ApprovalRequest.objects.get(run=fork, status=ApprovalRequest.Status.PENDING), user=make_user("vera", "reviewers"))
    drain_runs()
    final = run_latest_messages(run=fork)[-1]["content"][0]["text"]
    assert f"already paid by run {origin.run_id}" in final
    assert (SandboxPayment.objects.count(), Effect.objects.get().run) == (1, origin)


def test_a_call_the_checkpoint_waits_on_is_settled_as_an_error_and_its_request_is_not_copied(drain_runs, reviewer):
    pending = make_suspended_run(drain_runs, "r-wait")
    fork = run_fork(run_id="r-wait", step_index=1, user=reviewer)
    (settled,) = [part for part in run_input_messages(fork)[-1]["content"] if part["type"] == "tool_result"]
    assert settled["tool_call_id"] == pending.tool_call_id and settled["is_error"]
    assert "forked from run r-wait at step 1" in settled["output"]
    drain_runs()
    fork.refresh_from_db()
    assert fork.status == Run.Status.COMPLETED and not ApprovalRequest.objects.filter(run=fork).exists()
    assert SandboxPayment.objects.count() == 0


def test_no_token_of_the_origin_decides_a_request_of_the_fork(drain_runs, reviewer):
    origin_request = make_suspended_run(drain_runs, "r-origin")
    fork = run_fork(run_id="r-origin", step_index=0, user=reviewer)
    drain_runs()
    fork_request = ApprovalRequest.objects.get(run=fork)
    assert fork_request.approval_id != origin_request.approval_id
    with pytest.raises(ApprovalTokenInvalid):
        approval_decide(run_id=fork.run_id, approval_id=fork_request.approval_id, approved=True,
                        token=origin_request.token, user=make_user("vera", "reviewers"))


def test_a_forks_approvals_go_to_reviewers_even_when_its_agent_lets_its_creator_decide(drain_runs):
    creator = make_user("chloe")
    origin = Run.objects.create(run_id="r-chat", agent="assistant", input_messages="[]", created_by=creator)
    fork = Run.objects.create(run_id="r-chat-fork-1", agent="assistant", input_messages="[]", created_by=creator,
                              forked_from=origin, forked_from_step=0)
    assert approval_is_decidable_by(user=creator, run=origin)
    assert not approval_is_decidable_by(user=creator, run=fork)
    assert approval_is_decidable_by(user=make_user("rex", "reviewers"), run=fork)


def test_fork_ids_name_their_origin_and_count_its_forks(drain_runs, reviewer):
    origin = make_paid_run(drain_runs)
    first = run_fork(run_id=origin.run_id, step_index=0, user=reviewer)
    second = run_fork(run_id=origin.run_id, step_index=1, user=reviewer)
    assert (first.run_id, second.run_id) == ("r-paid-fork-1", "r-paid-fork-2")


def test_a_fork_id_fits_the_run_id_length_whatever_the_origins(drain_runs, reviewer):
    origin = make_paid_run(drain_runs, "r" * 200)
    fork = run_fork(run_id=origin.run_id, step_index=0, user=reviewer)
    assert len(fork.run_id) == 200 and fork.run_id.endswith("-fork-1")


def test_a_fork_takes_the_run_id_it_is_given_and_refuses_a_taken_one(drain_runs, reviewer):
    origin = make_paid_run(drain_runs)
    assert run_fork(run_id=origin.run_id, step_index=0, user=reviewer, new_run_id="retry-1").run_id == "retry-1"
    with pytest.raises(RunAlreadyExists):
        run_fork(run_id=origin.run_id, step_index=0, user=reviewer, new_run_id="retry-1")


def test_a_step_with_no_checkpoint_or_an_unknown_run_cannot_be_forked(drain_runs, reviewer):
    origin = make_paid_run(drain_runs)
    with pytest.raises(CheckpointNotFound):
        run_fork(run_id=origin.run_id, step_index=7, user=reviewer)
    with pytest.raises(RunNotFound):
        run_fork(run_id="nobody", step_index=0, user=reviewer)
