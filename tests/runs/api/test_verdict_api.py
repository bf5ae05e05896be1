"""Verdicts through the REST API: the reimbursement agent's approval flow, and every way a verdict is refused."""

from __future__ import annotations

import json

import pytest

from approvals.models import ApprovalRequest
from demo.models import SandboxPayment
from runs.models import Effect, Run
from runs.runtime.durable import create_approval_signer
from tests.runs.api.hostile_bodies import fuzz

pytestmark = pytest.mark.django_db(transaction=True)


def verdict_path(run_id: str, approval_id: str) -> str:
    return f"/api/runs/{run_id}/approvals/{approval_id}/"


def decide(client, run_id: str, request: dict, *, approved: bool = True, token: str | None = None, **extra):
    body = {"approved": approved, "token": request["token"] if token is None else token, **extra}
    return client.post(verdict_path(run_id, request["approval_id"]), body, format="json")


def status_of(request: dict) -> str:
    """The stored status of the approval request ``request`` (as the API showed it)."""
    return ApprovalRequest.objects.get(approval_id=request["approval_id"]).status


def pending_of(run: dict) -> dict:
    (request,) = run["pending_approvals"]
    return request


def forged_token(run_id: str, request: dict) -> str:
    """A well-formed token for exactly this request and run, signed with a secret that is not the server's."""
    unsigned = {key: value for key, value in request.items() if key != "token"}
    return create_approval_signer(secret="not-the-server-secret").sign(unsigned, run_id=run_id)


# --------------------------------------------------------------------------- the flow


def test_a_suspended_run_shows_one_pending_approval_with_a_token(start_suspended):
    request = pending_of(start_suspended("r-1"))
    assert request["tool_name"] == "pay_expense"
    assert request["input"] == {"expense_id": "exp-1042", "amount": "84.20", "currency": "EUR",
                                "recipient": "Ada Lovelace"}
    assert request["token"].startswith("v1.")


def test_an_approval_answers_200_with_the_decided_request_and_queues_the_run(
    start_suspended, reviewer_client, reviewer
):
    request = pending_of(start_suspended("r-1"))
    response = decide(reviewer_client, "r-1", request, reason="Receipt checked.")
    assert response.status_code == 200
    body = response.json()
    assert (body["approval_id"], body["status"], body["decided_by"], body["reason"]) == (
        request["approval_id"], "approved", reviewer.username, "Receipt checked."
    )
    assert body["decided_at"] is not None and body["expires_at"] > body["issued_at"]
    assert "token" not in body
    assert reviewer_client.get("/api/runs/r-1/").json()["status"] == "queued"


def test_an_approved_run_completes_with_one_committed_payment(start_suspended, reviewer_client, drain_runs):
    request = pending_of(start_suspended("r-1"))
    decide(reviewer_client, "r-1", request)
    drain_runs()
    run = reviewer_client.get("/api/runs/r-1/").json()
    assert run["status"] == "completed"
    assert [(e["tool_name"], e["status"]) for e in run["effects"]] == [("pay_expense", "verified")]
    assert run["pending_approvals"] == []
    assert [leg["kind"] for leg in run["legs"]] == ["start", "verdict"]
    assert status_of(request) == ApprovalRequest.Status.USED
    assert SandboxPayment.objects.count() == 1


def test_a_used_approval_cannot_be_decided_again(start_suspended, reviewer_client, drain_runs):
    request = pending_of(start_suspended("r-1"))
    decide(reviewer_client, "r-1", request)
    drain_runs()
    response = decide(reviewer_client, "r-1", request)
    assert response.status_code == 409
    assert response.json()["status"] == "used"
    assert SandboxPayment.objects.count() == 1


def test_deciding_the_same_approval_twice_answers_409(start_suspended, reviewer_client):
    request = pending_of(start_suspended("r-1"))
    decide(reviewer_client, "r-1", request, approved=True)
    response = decide(reviewer_client, "r-1", request, approved=False)
    assert response.status_code == 409
    assert status_of(request) == ApprovalRequest.Status.APPROVED


def test_a_denied_payment_is_not_made_and_the_run_completes(start_suspended, reviewer_client, drain_runs):
    request = pending_of(start_suspended("r-1"))
    response = decide(reviewer_client, "r-1", request, approved=False, reason="Duplicate claim.")
    assert response.json()["status"] == "denied"
    drain_runs()
    run = reviewer_client.get("/api/runs/r-1/").json()
    assert run["status"] == "completed"
    assert run["effects"] == []
    assert not SandboxPayment.objects.exists()


def test_a_denial_reason_reaches_the_model(start_suspended, reviewer_client, drain_runs):
    request = pending_of(start_suspended("r-1"))
    decide(reviewer_client, "r-1", request, approved=False, reason="Duplicate claim.")
    drain_runs()
    last = reviewer_client.get("/api/runs/r-1/checkpoints/").json()["results"][-1]
    tool_results = [part for message in last["messages"] if message["role"] == "tool" for part in message["content"]]
    denial = next(part for part in tool_results if part["tool_name"] == "pay_expense")
    assert denial["is_error"] is True
    assert "Duplicate claim." in json.dumps(denial["output"])


# --------------------------------------------------------------------------- refusals


def test_a_forged_token_answers_400_and_authorizes_nothing(start_suspended, reviewer_client, drain_runs):
    request = pending_of(start_suspended("r-1"))
    response = decide(reviewer_client, "r-1", request, token=forged_token("r-1", request))
    assert response.status_code == 400
    assert "token" in response.json()
    drain_runs()
    run = reviewer_client.get("/api/runs/r-1/").json()
    assert run["status"] == "suspended"
    assert pending_of(run)["approval_id"] == request["approval_id"]
    assert not SandboxPayment.objects.exists()


def test_a_garbled_token_answers_400(start_suspended, reviewer_client):
    request = pending_of(start_suspended("r-1"))
    response = decide(reviewer_client, "r-1", request, token=request["token"][:-2] + "xx")
    assert response.status_code == 400
    assert status_of(request) == ApprovalRequest.Status.PENDING


def test_a_token_of_another_run_answers_400(start_suspended, reviewer_client, drain_runs):
    request_a = pending_of(start_suspended("run-a", "exp-1042"))
    request_b = pending_of(start_suspended("run-b", "exp-2077"))
    response = decide(reviewer_client, "run-b", request_b, token=request_a["token"])
    assert response.status_code == 400
    drain_runs()
    assert Run.objects.get(run_id="run-b").status == Run.Status.SUSPENDED
    assert status_of(request_b) == ApprovalRequest.Status.PENDING


def test_a_token_posted_to_another_runs_path_answers_400(start_suspended, reviewer_client):
    request_a = pending_of(start_suspended("run-a"))
    start_suspended("run-b")
    # Run A's own approval id and token, but under run B's path: the token is bound to run A.
    response = reviewer_client.post(
        verdict_path("run-b", request_a["approval_id"]), {"approved": True, "token": request_a["token"]}, format="json"
    )
    assert response.status_code in (400, 404)
    assert status_of(request_a) == ApprovalRequest.Status.PENDING


@pytest.mark.parametrize(("client", "refused_with"), [("outsider_client", 403), ("anonymous_client", 401)],
                         ids=["signed-in-without-the-reviewer-permission", "anonymous"])
def test_a_verdict_from_who_may_not_decide_is_refused_and_decides_nothing(start_suspended, request, client,
                                                                          refused_with):
    pending = pending_of(start_suspended("r-1"))
    assert decide(request.getfixturevalue(client), "r-1", pending).status_code == refused_with
    assert status_of(pending) == ApprovalRequest.Status.PENDING


def test_an_outsider_is_told_another_users_run_does_not_exist(start_suspended, outsider_client):
    start_suspended("r-1")
    response = outsider_client.get("/api/runs/r-1/")
    assert (response.status_code, response.json()["detail"]) == (404, "No run 'r-1'.")


def test_a_verdict_for_an_unknown_approval_answers_404(start_suspended, reviewer_client):
    request = pending_of(start_suspended("r-1"))
    response = reviewer_client.post(verdict_path("r-1", "nope"), {"approved": True, "token": request["token"]},
                                    format="json")
    assert response.status_code == 404


@pytest.mark.parametrize(("fields", "field"), [({"approved": "yes"}, "approved"), ({"reason": "x" * 2001}, "reason")],
                         ids=["approved-not-a-boolean", "reason-over-2000-characters"])
def test_a_malformed_verdict_answers_400_naming_the_field(start_suspended, reviewer_client, fields, field):
    response = decide(reviewer_client, "r-1", pending_of(start_suspended("r-1")), **fields)
    assert (response.status_code, field in response.json()) == (400, True)


def test_a_misspelt_key_is_400_and_decides_nothing(start_suspended, reviewer_client):
    """A client that meant to edit the input ("editedInput") must not approve the model's own input instead."""
    request = pending_of(start_suspended("r-1"))
    response = decide(reviewer_client, "r-1", request, editedInput={"amount": "80.00"})
    assert response.status_code == 400 and "editedInput" in response.json()["non_field_errors"][0]
    assert status_of(request) == ApprovalRequest.Status.PENDING


def test_an_expired_request_answers_409_and_stays_expired(start_suspended, reviewer_client):
    request = pending_of(start_suspended("r-1"))
    ApprovalRequest.objects.filter(approval_id=request["approval_id"]).update(expires_at="2000-01-01T00:00:00Z")
    response = decide(reviewer_client, "r-1", request)
    assert response.status_code == 409
    assert status_of(request) == ApprovalRequest.Status.EXPIRED


# --------------------------------------------------------------------------- cancel


def test_cancelling_a_suspended_run_answers_200_cancelled(start_suspended, api_client):
    start_suspended("r-1")
    response = api_client.post("/api/runs/r-1/cancel/")
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["pending_approvals"]) == ("cancelled", [])


def test_the_approval_of_a_cancelled_run_cannot_be_decided(start_suspended, api_client, reviewer_client, drain_runs):
    request = pending_of(start_suspended("r-1"))
    api_client.post("/api/runs/r-1/cancel/")
    response = decide(reviewer_client, "r-1", request)
    assert response.status_code == 409
    drain_runs()
    assert Run.objects.get(run_id="r-1").status == Run.Status.CANCELLED
    assert not Effect.objects.exists()


def test_cancelling_a_cancelled_run_answers_409(start_suspended, api_client):
    start_suspended("r-1")
    api_client.post("/api/runs/r-1/cancel/")
    assert api_client.post("/api/runs/r-1/cancel/").status_code == 409


def test_cancelling_a_completed_run_answers_409(start_suspended, api_client, reviewer_client, drain_runs):
    decide(reviewer_client, "r-1", pending_of(start_suspended("r-1")))
    drain_runs()
    assert api_client.post("/api/runs/r-1/cancel/").status_code == 409


# --------------------------------------------------------------------------- fuzz


def test_hostile_verdict_bodies_never_answer_500_nor_decide(start_suspended, reviewer_client, drain_runs):
    request = pending_of(start_suspended("r-1"))
    assert fuzz(reviewer_client, verdict_path("r-1", request["approval_id"])) == []
    assert status_of(request) == ApprovalRequest.Status.PENDING


# A NUL in the path answers 400 before any view (tests/test_hostile_input.py).
@pytest.mark.parametrize("approval_id", ["x" * 300, "%F0%9F%98%80", "..", "a:b"])
def test_odd_approval_ids_in_the_path_answer_404(start_suspended, reviewer_client, approval_id):
    request = pending_of(start_suspended("r-1"))
    response = reviewer_client.post(f"/api/runs/r-1/approvals/{approval_id}/",
                                    {"approved": True, "token": request["token"]}, format="json")
    assert response.status_code == 404
    assert "detail" in response.json()
