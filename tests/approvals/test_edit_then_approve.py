"""Edit, then approve (SERVICE.md, edited_input): a reviewer approves other input than the model's, from the API or
the console; it is validated against the tool's schema, signed by the server, run, bound in the ledger, and shown
with who edited it in the stream, the timeline, the receipt and `runs export`."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import Client

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.models import Effect, Run
from runs.presenters.receipt import run_receipt
from tests.factories import make_suspended_run, make_user
from tests.streams import follow

pytestmark = pytest.mark.django_db(transaction=True)

Status = ApprovalRequest.Status
ASKED = {"expense_id": "exp-1042", "amount": "84.20", "currency": "EUR", "recipient": "Ada Lovelace"}
EDITED = {**ASKED, "amount": "80.00"}


@pytest.fixture
def waiting(drain_runs, db):
    """Olga's reimbursement run r1, waiting for its payment's approval (of 84.20 EUR)."""
    return make_suspended_run(drain_runs, "r1", user=make_user("olga"))


def api_decide(client, request, **body):
    return client.post(f"/api/runs/r1/approvals/{request.approval_id}/",
                       {"approved": True, "token": request.token, **body}, format="json")


@pytest.fixture
def edited_run(waiting, reviewer_client, drain_runs):
    """r1 approved by rita with the amount edited to 80.00, then run to its end."""
    response = api_decide(reviewer_client, waiting, edited_input=EDITED)
    assert response.status_code == 200, response.content
    drain_runs()
    return Run.objects.get(run_id="r1")


def test_the_api_records_the_edit_with_the_approval(waiting, reviewer_client):
    body = api_decide(reviewer_client, waiting, edited_input=EDITED).json()
    assert (body["status"], body["decided_by"], body["input"], body["edited_input"]) == (
        "approved", "rita", ASKED, EDITED)


def test_the_payment_is_made_with_the_edited_amount_and_the_ledger_binds_it(edited_run):
    effect = Effect.objects.get(run=edited_run, tool_name="pay_expense")
    assert (effect.request, effect.status) == (EDITED, Effect.Status.VERIFIED)
    assert effect.approval["edited_by"] == "rita"
    assert effect.receipt["amount"] == "80.00"


def test_an_edit_the_tools_schema_refuses_is_400_under_edited_input_and_nothing_is_decided(waiting, reviewer_client):
    response = api_decide(reviewer_client, waiting, edited_input={**ASKED, "amount": 80})
    assert response.status_code == 400
    assert "amount" in response.json()["edited_input"][0]
    assert ApprovalRequest.objects.get(pk=waiting.pk).status == Status.PENDING


def test_an_edit_with_a_denial_is_400(waiting, reviewer_client):
    response = api_decide(reviewer_client, waiting, approved=False, reason="no", edited_input=EDITED)
    assert (response.status_code, ApprovalRequest.objects.get(pk=waiting.pk).status) == (400, Status.PENDING)


def test_an_edit_is_not_accepted_with_a_token_for_another_request(waiting, reviewer_client):
    response = api_decide(reviewer_client, waiting, token=waiting.token[:-4] + "AAAA", edited_input=EDITED)
    assert (response.status_code, ApprovalRequest.objects.get(pk=waiting.pk).edited_token) == (400, "")


def test_the_stream_says_edited_and_the_result_carries_the_edit_and_who(edited_run, reviewer):
    parts = [event["data"] for event in follow(reviewer, "r1") if event["id"] is not None]
    told = next(part for part in parts if part["type"] == "tool-approval-verdict")
    result = next(part for part in parts if part["type"] == "tool-result" and part["tool_name"] == "pay_expense")
    assert (told["edited"], told["edit"]) == (True, {"input": EDITED, "by": "rita"})
    assert result["edit"] == {"input": EDITED, "by": "rita"}


def test_the_model_learns_the_input_the_payment_ran_with(edited_run):
    assert Run.objects.get(pk=edited_run.pk).status == Run.Status.COMPLETED
    receipt = run_receipt(edited_run)
    assert "Paid 80.00 EUR" in receipt["final_text"]


def test_the_receipt_and_export_show_the_original_the_edit_and_who(edited_run, tmp_path):
    call_command("runs", "export", "r1", "-o", str(tmp_path / "r1.json"))
    (approval,) = json.loads((tmp_path / "r1.json").read_text())["approvals"]
    assert (approval["input"], approval["edited_input"], approval["edited_by"]) == (ASKED, EDITED, "rita")
    assert approval["edited_token_sha256"] and "edited_token" not in approval


def test_the_timeline_shows_the_edit_and_who_made_it(edited_run, reviewer):
    client = Client()
    client.force_login(reviewer)
    page = client.get("/runs/r1/").content.decode()
    assert "Approved with an edit: pay_expense" in page
    assert "edited by rita: amount &quot;84.20&quot; → &quot;80.00&quot;" in page
    assert 'data-edited-by="rita"' in page  # the story's call: it ran with the edited input


# ---------------------------------------------------------------- the console's "Edit and approve"


def console_post(client, request, **data):
    return client.post(f"/console/r1/{request.approval_id}/", data)


def test_the_console_confirms_an_edit_then_records_it(waiting, reviewer):
    client = Client()
    client.force_login(reviewer)
    confirm = console_post(client, waiting, verdict="edit", edited_input=json.dumps(EDITED))
    assert "You approve instead" in confirm.content.decode()
    assert ApprovalRequest.objects.get(pk=waiting.pk).status == Status.PENDING  # nothing before the confirmation
    console_post(client, waiting, verdict="edit", edited_input=json.dumps(EDITED), confirm="yes")
    decided = ApprovalRequest.objects.get(pk=waiting.pk)
    assert (decided.status, decided.edited_input, decided.decided_by) == (Status.APPROVED, EDITED, reviewer)


@pytest.mark.parametrize("text, says", [("{not json", "is not JSON"), (json.dumps({"amount": "1"}), "required")])
def test_the_console_answers_a_bad_edit_with_a_form_error_and_decides_nothing(waiting, reviewer, text, says):
    client = Client()
    client.force_login(reviewer)
    response = console_post(client, waiting, verdict="edit", edited_input=text, confirm="yes")
    page = response.content.decode()
    assert response.status_code == 400 and 'id="edit-error"' in page and says in page
    assert ApprovalRequest.objects.get(pk=waiting.pk).status == Status.PENDING


def test_the_consoles_confirmation_of_an_edit_says_approve_not_deny(waiting, reviewer):
    client = Client()
    client.force_login(reviewer)
    page = console_post(client, waiting, verdict="edit", edited_input=json.dumps(EDITED)).content.decode()
    heading = page.split('id="confirm-heading">', 1)[1].split("</h2>", 1)[0]
    assert "Confirm: approve with your edit" in heading and "deny" not in heading


@pytest.mark.parametrize("text", [
    '{"amount": 1' + "0" * 5000 + "}",  # past Python's 4300 digits of an int
    "[" * 100_000 + "]" * 100_000,  # past the stack
    json.dumps({**EDITED, "rate": 1.0}).replace("1.0", "NaN"),  # the schema allows more keys; JSON has no NaN
], ids=["long-number", "deep", "nan"])
def test_the_console_answers_json_it_cannot_take_with_a_form_error_not_a_500(waiting, reviewer, text):
    client = Client(raise_request_exception=False)
    client.force_login(reviewer)
    response = console_post(client, waiting, verdict="edit", edited_input=text, confirm="yes")
    assert response.status_code == 400 and 'id="edit-error"' in response.content.decode()
    assert ApprovalRequest.objects.get(pk=waiting.pk).status == Status.PENDING


@pytest.mark.parametrize("edit, says", [
    ({**ASKED, "amount": "9" * 100_000}, "bytes as compact JSON"),
    ({**ASKED, "amount": "80.00\x00"}, "NUL"),
    ({**ASKED, "note": json.loads("[" * 40 + "]" * 40)}, "nested deeper"),
], ids=["huge", "nul", "deep"])
def test_an_edit_that_cannot_be_stored_and_signed_is_400_and_nothing_is_decided(waiting, reviewer, edit, says):
    with pytest.raises(ValidationError) as raised:
        approval_decide(run_id="r1", approval_id=waiting.approval_id, approved=True, token=waiting.token,
                        user=reviewer, edited_input=edit)
    assert says in raised.value.message_dict["edited_input"][0]
    assert ApprovalRequest.objects.get(pk=waiting.pk).status == Status.PENDING


def test_a_huge_edit_through_the_api_is_400_under_edited_input(waiting, reviewer_client):
    response = api_decide(reviewer_client, waiting, edited_input={**ASKED, "amount": "9" * 500_000})
    assert response.status_code == 400 and "at most" in response.json()["edited_input"][0]
    assert len(response.content) < 2000  # the answer does not echo the value
    assert ApprovalRequest.objects.get(pk=waiting.pk).status == Status.PENDING
