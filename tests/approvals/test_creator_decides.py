"""Who decides an approval (SERVICE.md, approvals_decided_by): reviewers always; the run's creator too when its agent
says "creator"; for an agent whose approvals reviewers decide, its creator only if a reviewer."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from approvals.models import ApprovalRequest
from runs.models import Run
from tests.factories import make_queued_run, make_user, verdict

pytestmark = pytest.mark.django_db

SEND = [{"role": "user", "content": "Tell Ada the build is green"}]


@pytest.fixture
def olga(db):
    return make_user("olga")


def suspended(drain_runs, agent: str, user, run_id: str = "r1") -> ApprovalRequest:
    make_queued_run(run_id, agent=agent, user=user, messages=SEND if agent == "assistant" else None)
    drain_runs()
    return ApprovalRequest.objects.select_related("run").get(run__run_id=run_id, status="pending")


def decide(client, request: ApprovalRequest, *, approved: bool = True):
    return client.post(f"/api/runs/{request.run.run_id}/approvals/{request.approval_id}/",
                       {"approved": approved, "token": request.token}, format="json")


def test_the_creator_decides_their_assistants_request_through_the_api(olga, token_client, drain_runs):
    request = suspended(drain_runs, "assistant", olga)
    response = decide(token_client(olga), request)
    assert (response.status_code, response.json()["status"], response.json()["decided_by"]) == (200, "approved", "olga")
    assert Run.objects.get(run_id="r1").status == Run.Status.QUEUED


def test_the_creator_is_shown_the_token_of_their_assistants_request(olga, token_client, drain_runs):
    request = suspended(drain_runs, "assistant", olga)
    shown = token_client(olga).get("/api/runs/r1/").json()["pending_approvals"]
    assert [pending["token"] for pending in shown] == [request.token]


def test_the_creator_of_a_run_reviewers_decide_may_not_decide_it(olga, token_client, drain_runs):
    request = suspended(drain_runs, "reimbursement", olga)
    assert decide(token_client(olga), request).status_code == 403
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalRequest.Status.PENDING
    assert "token" not in token_client(olga).get("/api/runs/r1/").json()["pending_approvals"][0]


def test_another_user_may_not_decide_the_assistants_request(olga, token_client, drain_runs):
    request = suspended(drain_runs, "assistant", olga)
    assert decide(token_client(make_user("pat")), request).status_code == 403
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalRequest.Status.PENDING


def test_a_reviewer_still_decides_an_assistants_request(olga, reviewer_client, drain_runs):
    request = suspended(drain_runs, "assistant", olga)
    assert decide(reviewer_client, request, approved=False).status_code == 200


def test_the_service_refuses_a_verdict_from_someone_who_may_not_decide(olga, drain_runs):
    request = suspended(drain_runs, "reimbursement", olga)
    with pytest.raises(PermissionDenied):
        verdict(request, user=olga)
