"""Approvals as a service: recording, deciding once, expiring, superseding, spending tokens."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.errors import ApprovalNotDecidable, ApprovalTokenInvalid
from approvals.models import ApprovalRequest
from approvals.services import approval_expire_due, approval_requests_record
from runs.models import Checkpoint, Effect, Run
from runs.runtime.durable import create_approval_signer
from runs.stores.sessions import DatabaseSessionStore
from tests.factories import make_queued_run, make_suspended_run, verdict

pytestmark = pytest.mark.django_db(transaction=True)


def final_text(run_id):
    return DatabaseSessionStore().load(run_id)["messages"][-1]["content"][0]["text"]


def test_a_suspension_records_its_request_with_a_token_bound_to_the_run(suspended, settings):
    payload = create_approval_signer(secret=settings.DEUZ_APPROVAL_SECRET).verify(suspended.token)
    assert (suspended.status, suspended.tool_name, payload["run_id"], payload["approval_id"]) == (
        "pending", "pay_expense", "r1", suspended.approval_id)


def test_a_verdict_queues_the_resume_leg(suspended):
    verdict(suspended)
    assert Run.objects.get(run_id="r1").status == "queued"


def test_a_verdict_is_recorded_once(suspended):
    verdict(suspended)
    with pytest.raises(ApprovalNotDecidable):
        verdict(suspended, approved=False)
    assert ApprovalRequest.objects.get(pk=suspended.pk).status == "approved"


def test_a_token_signed_with_another_secret_authorizes_nothing(suspended):
    forged = create_approval_signer(secret="attacker").sign(
        {"approval_id": suspended.approval_id, "tool_call_id": suspended.tool_call_id, "tool_name": "pay_expense",
         "input": suspended.tool_input}, run_id="r1")
    with pytest.raises(ApprovalTokenInvalid):
        verdict(suspended, token=forged)
    assert (ApprovalRequest.objects.get(pk=suspended.pk).status, Run.objects.get(run_id="r1").status) == (
        "pending", "suspended")


def test_a_token_from_another_run_authorizes_nothing(suspended, drain_runs):
    other = make_suspended_run(drain_runs, "r2", messages=[{"role": "user", "content": "Reimburse exp-2077"}])
    with pytest.raises(ApprovalTokenInvalid):
        verdict(suspended, token=other.token)


def test_an_approved_payment_is_made_once_and_its_token_is_spent(suspended, drain_runs):
    verdict(suspended)
    drain_runs()
    assert (Run.objects.get(run_id="r1").status, Effect.objects.get().status) == ("completed", "verified")
    assert ApprovalRequest.objects.get(pk=suspended.pk).status == "used"
    with pytest.raises(ApprovalNotDecidable):
        verdict(suspended)


def test_a_denied_payment_is_never_made(suspended, drain_runs):
    verdict(suspended, approved=False, reason="Receipt missing.")
    drain_runs()
    assert (Run.objects.get(run_id="r1").status, Effect.objects.count()) == ("completed", 0)
    assert "Receipt missing." in final_text("r1")


def test_an_expired_request_cannot_be_decided(suspended):
    ApprovalRequest.objects.filter(pk=suspended.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(ApprovalNotDecidable, match="expired"):
        verdict(suspended)
    assert ApprovalRequest.objects.get(pk=suspended.pk).status == "expired"


def test_an_expired_request_resumes_the_run_with_a_denial(suspended, drain_runs):
    ApprovalRequest.objects.filter(pk=suspended.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert approval_expire_due() == 1
    drain_runs()
    assert (Run.objects.get(run_id="r1").status, Effect.objects.count()) == ("completed", 0)
    assert "denied by default" in final_text("r1")


def test_a_request_from_an_older_revision_is_superseded(suspended):
    run = suspended.run
    newer = Checkpoint.objects.create(run=run, session_key="r1", step_index=5, status="suspended",
                                      message_count=0, created_at_ms=0, owner_epoch=run.owner_epoch)
    approval_requests_record(revision=newer, requests=[
        {"approval_id": "new", "tool_call_id": "c9", "tool_name": "pay_expense", "input": {}}])
    assert ApprovalRequest.objects.get(pk=suspended.pk).status == "superseded"
    with pytest.raises(ApprovalNotDecidable):
        verdict(suspended)


def test_a_cancelled_runs_request_cannot_be_decided(suspended):
    from runs.services.lifecycle import run_cancel

    run_cancel(run_id="r1")
    with pytest.raises(ApprovalNotDecidable):
        verdict(suspended)


def test_a_run_id_holding_double_colons_runs_to_its_end_with_its_sub_agent(drain_runs):
    # '::' also joins a sub-agent's key to its parent's, and a run id may hold it (1-200 of [A-Za-z0-9._:-]).
    make_queued_run("team::nightly", agent="coder")
    drain_runs()
    for _ in range(5):
        pending = ApprovalRequest.objects.filter(run__run_id="team::nightly", status=ApprovalRequest.Status.PENDING)
        if not pending:
            break
        for request in pending:
            verdict(request)
        drain_runs()
    run = Run.objects.get(run_id="team::nightly")
    keys = set(Checkpoint.objects.filter(run=run).values_list("session_key", flat=True))
    assert (run.status, run.error) == (Run.Status.COMPLETED, "")
    assert run.step_index >= 1  # the root's checkpoints moved the run's mirror: they were not taken for a child's
    assert "team::nightly" in keys and any(key.startswith("team::nightly::coder#") for key in keys)
