"""Four eyes (SERVICE.md, approvals_decided_by): the creator of a run whose approvals reviewers decide never decides
them, reviewer or superuser, through any door (service, API, console, admin), nor sees their tokens; another
reviewer does; DEUZ_FOUR_EYES=0 lets one person decide their own runs."""

from __future__ import annotations

import pytest
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.test import Client

from approvals.models import ApprovalRequest
from approvals.roles import FOUR_EYES, REVIEWERS_GROUP
from tests.factories import make_suspended_run, make_user, verdict

pytestmark = pytest.mark.django_db

Status = ApprovalRequest.Status


@pytest.fixture
def creator(db):
    """A reviewer who starts the reimbursement run r1 (reviewers decide its approvals)."""
    return make_user("cora", REVIEWERS_GROUP, is_staff=True)


@pytest.fixture
def request_of_creator(creator, drain_runs):
    return make_suspended_run(drain_runs, "r1", user=creator)


def status_of(request: ApprovalRequest) -> str:
    return ApprovalRequest.objects.get(pk=request.pk).status


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def api_decide(client, request: ApprovalRequest):
    return client.post(f"/api/runs/r1/approvals/{request.approval_id}/", {"approved": True, "token": request.token},
                       format="json")


# ---------------------------------------------------------------- the rule, in the service


def test_the_service_refuses_the_creator_of_a_reviewers_run_even_as_a_reviewer(request_of_creator, creator):
    with pytest.raises(PermissionDenied, match="Four eyes"):
        verdict(request_of_creator, user=creator)
    assert status_of(request_of_creator) == Status.PENDING


def test_a_superuser_does_not_decide_their_own_reviewers_run(drain_runs):
    root = make_user("root", is_superuser=True, is_staff=True)
    request = make_suspended_run(drain_runs, "r1", user=root)
    with pytest.raises(PermissionDenied):
        verdict(request, user=root)


def test_another_reviewer_decides_the_creators_run(request_of_creator, reviewer):
    verdict(request_of_creator, user=reviewer)
    assert status_of(request_of_creator) == Status.APPROVED


def test_four_eyes_off_lets_a_reviewer_decide_their_own_run(request_of_creator, creator, settings):
    settings.DEUZ_FOUR_EYES = False
    verdict(request_of_creator, user=creator)
    assert status_of(request_of_creator) == Status.APPROVED


# ---------------------------------------------------------------- the API


def test_the_api_answers_the_creator_403_in_json_saying_why(request_of_creator, creator, token_client):
    response = api_decide(token_client(creator), request_of_creator)
    assert (response.status_code, response["Content-Type"]) == (403, "application/json")
    assert response.json()["detail"] == FOUR_EYES
    assert status_of(request_of_creator) == Status.PENDING


def test_the_api_lets_another_reviewer_decide(request_of_creator, reviewer_client):
    assert api_decide(reviewer_client, request_of_creator).status_code == 200


def test_the_creator_is_not_shown_the_token_another_reviewer_is(request_of_creator, creator, token_client,
                                                                  reviewer_client):
    mine = token_client(creator).get("/api/runs/r1/").json()["pending_approvals"][0]
    theirs = reviewer_client.get("/api/runs/r1/").json()["pending_approvals"][0]
    assert ("token" in mine, theirs.get("token")) == (False, request_of_creator.token)


# ---------------------------------------------------------------- the console


def decide_page(request: ApprovalRequest) -> str:
    return f"/console/r1/{request.approval_id}/"


def test_the_decide_page_tells_the_creator_why_and_offers_no_verdict(request_of_creator, creator):
    response = browser(creator).get(decide_page(request_of_creator))
    page = response.content.decode()
    assert response.status_code == 200
    assert 'id="four-eyes"' in page and "Another reviewer must decide this request" in page
    assert "Approve…" not in page and "Deny…" not in page and "Edit and approve…" not in page


def test_a_forged_console_post_by_the_creator_gets_403_and_decides_nothing(request_of_creator, creator):
    response = browser(creator).post(decide_page(request_of_creator), {"verdict": "approve", "confirm": "yes"})
    assert response.status_code == 403
    assert status_of(request_of_creator) == Status.PENDING


def test_another_reviewer_is_offered_the_verdicts_and_records_one(request_of_creator, reviewer):
    client = browser(reviewer)
    assert "Approve…" in client.get(decide_page(request_of_creator)).content.decode()
    client.post(decide_page(request_of_creator), {"verdict": "approve", "confirm": "yes"})
    assert status_of(request_of_creator) == Status.APPROVED


# ---------------------------------------------------------------- the admin


def admin_approve(user, request: ApprovalRequest):
    return browser(user).post("/admin/approvals/approvalrequest/",
                              {"action": "approve_selected", "_selected_action": [request.pk]}, follow=True)


def test_the_admin_refuses_the_creators_action_with_a_message(request_of_creator, creator):
    response = admin_approve(creator, request_of_creator)
    shown = [(message.level, str(message)) for message in response.context["messages"]]
    assert response.status_code == 200
    assert [level for level, _ in shown] == [messages.ERROR] and "Four eyes" in shown[0][1]
    assert status_of(request_of_creator) == Status.PENDING


def test_the_admin_lets_another_reviewer_approve(request_of_creator):
    admin_approve(make_user("rex", REVIEWERS_GROUP, is_staff=True), request_of_creator)
    assert status_of(request_of_creator) == Status.APPROVED
