"""The demo agents run end to end through the in-process worker."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.models import Run
from runs.services.lifecycle import run_start


@pytest.mark.django_db(transaction=True)
def test_the_reimbursement_agent_suspends_then_pays_after_approval(drain_runs):
    run_start(agent="reimbursement", messages=[{"role": "user", "content": "Reimburse exp-1042"}], run_id="r1")
    drain_runs()
    request = ApprovalRequest.objects.get(run__run_id="r1")
    approval_decide(run_id="r1", approval_id=request.approval_id, approved=True, token=request.token, user=None)
    drain_runs()
    run = Run.objects.get(run_id="r1")
    assert (run.status, run.effects.get().status) == ("completed", "verified")
