"""The Django admin: every model browsable with real records, read-only, with actions that call the services."""

from __future__ import annotations

import pytest
from django.contrib import messages
from django.contrib.admin.sites import site
from django.test import RequestFactory
from django.urls import reverse

from approvals.models import ApprovalRequest
from demo.models import SandboxPayment
from runs.admin import token_preview
from runs.models import Checkpoint, Effect, JournalEntry, Leg, Run, RunMessage
from tests.factories import make_paid_run, make_suspended_run, make_user, verdict

pytestmark = pytest.mark.django_db(transaction=True)


def _url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _messages(response) -> list[tuple[int, str]]:
    return [(message.level, str(message)) for message in response.context["messages"]]


def _post_action(client, model, action: str, objects) -> object:
    return client.post(
        _url(model, "changelist"), {"action": action, "_selected_action": [obj.pk for obj in objects]}, follow=True
    )


@pytest.fixture
def paid_run(drain_runs):
    return make_paid_run(drain_runs, "r-paid")


def _suspension_page(client, run: Run) -> str:
    """The admin page of the checkpoint ``run`` saved when it suspended."""
    checkpoint = Checkpoint.objects.get(run=run, status="suspended")
    return client.get(_url(Checkpoint, "change", checkpoint.pk)).content.decode()


@pytest.fixture
def support_client(browser_for):
    """A staff user in the support group: reads every record, decides nothing."""
    return browser_for("support")


@pytest.fixture
def reviewer_staff(browser_for, users):
    """A staff user in the reviewers group, and their signed-in client."""
    return browser_for("reviewer"), users["reviewer"]


def _request_part(run: Run) -> JournalEntry:
    return next(e for e in JournalEntry.objects.filter(run=run, is_sentinel=False)
                if e.decoded_part["type"] == "tool-approval-request")


# Each model with a field whose value its changelist must show for the paid run's records.
RECORDS = [
    (Run, lambda: Run.objects.get(run_id="r-paid"), "r-paid"),
    (Leg, lambda: Leg.objects.filter(run__run_id="r-paid").last(), "verdict"),
    (Effect, lambda: Effect.objects.get(), "pay_expense"),
    (RunMessage, lambda: RunMessage.objects.filter(run__run_id="r-paid").first(), "r-paid"),
    (Checkpoint, lambda: Checkpoint.objects.filter(run__run_id="r-paid").last(), "r-paid"),
    (SandboxPayment, lambda: SandboxPayment.objects.get(), "tx-"),
    (JournalEntry, lambda: JournalEntry.objects.filter(run__run_id="r-paid", is_sentinel=False).last(), "r-paid"),
    (ApprovalRequest, lambda: ApprovalRequest.objects.get(), "pay_expense"),
]


@pytest.mark.parametrize(("model", "get", "shown"), RECORDS, ids=[model.__name__ for model, _, _ in RECORDS])
def test_changelist_lists_the_records_for_a_superuser(admin_client, paid_run, model, get, shown):
    response = admin_client.get(_url(model, "changelist"))
    assert response.status_code == 200
    assert response.context["cl"].result_count >= 1
    assert shown in response.content.decode()


@pytest.mark.parametrize(("model", "get", "shown"), RECORDS, ids=[model.__name__ for model, _, _ in RECORDS])
def test_change_page_loads_for_a_superuser(admin_client, paid_run, model, get, shown):
    response = admin_client.get(_url(model, "change", get().pk))
    assert response.status_code == 200
    assert shown in response.content.decode()


def test_run_page_shows_its_legs_and_effects_inline(admin_client, paid_run):
    content = admin_client.get(_url(Run, "change", paid_run.pk)).content.decode()
    assert paid_run.effects.get().operation_id in content
    assert "verdict" in content  # the second leg's kind


def test_checkpoint_page_renders_the_decoded_history(admin_client, paid_run):
    checkpoint = Checkpoint.objects.filter(run=paid_run).last()
    content = admin_client.get(_url(Checkpoint, "change", checkpoint.pk)).content.decode()
    assert "<pre>" in content
    assert "Reimburse exp-1042" in content
    assert "transaction tx-" in content  # the final assistant message


def test_checkpoint_page_shortens_the_approval_tokens_it_holds(admin_client, drain_runs):
    request = make_suspended_run(drain_runs)
    token = request.token
    content = _suspension_page(admin_client, request.run)
    assert "pay_expense" in content
    assert token not in content
    assert token_preview(token) in content


def test_journal_page_shortens_the_approval_token_of_a_request_part(admin_client, drain_runs):
    request = make_suspended_run(drain_runs)
    run, token = request.run, request.token
    content = admin_client.get(_url(JournalEntry, "change", _request_part(run).pk)).content.decode()
    assert "pay_expense" in content
    assert token not in content
    assert token_preview(token) in content


def test_run_message_page_shows_a_size_not_the_stored_bytes(admin_client, paid_run):
    message = RunMessage.objects.filter(run=paid_run).order_by("id").first()  # the user's message
    content = admin_client.get(_url(RunMessage, "change", message.pk)).content.decode()
    assert "bytes" in content
    assert "Reimburse exp-1042" not in content


def test_approval_page_shows_only_a_preview_of_the_token(admin_client, drain_runs):
    request = make_suspended_run(drain_runs)
    content = admin_client.get(_url(ApprovalRequest, "change", request.pk)).content.decode()
    assert request.token not in content
    assert token_preview(request.token) in content


def test_two_tokens_previews_differ(drain_runs):
    first, second = (make_suspended_run(drain_runs, run_id).token for run_id in ("a", "b"))
    assert first[:12] == second[:12]  # the tokens' shared encoded header: their own start tells nothing apart
    assert token_preview(first) != token_preview(second)


def test_approve_action_approves_the_request_and_queues_the_run(admin_client, admin_user, drain_runs):
    request = make_suspended_run(drain_runs)
    run = request.run
    response = _post_action(admin_client, ApprovalRequest, "approve_selected", [request])
    request.refresh_from_db()
    assert (request.status, request.decided_by, request.reason) == ("approved", admin_user, "Decided in the admin")
    assert Run.objects.get(pk=run.pk).status == "queued"
    assert (messages.SUCCESS, "1 request(s) approved.") in _messages(response)


def test_deny_action_denies_the_request_and_queues_the_run(admin_client, drain_runs):
    request = make_suspended_run(drain_runs)
    run = request.run
    _post_action(admin_client, ApprovalRequest, "deny_selected", [request])
    request.refresh_from_db()
    assert request.status == "denied"
    assert Run.objects.get(pk=run.pk).status == "queued"


def test_deciding_a_decided_request_reports_an_error_not_a_500(admin_client, drain_runs):
    request = make_suspended_run(drain_runs)
    _post_action(admin_client, ApprovalRequest, "deny_selected", [request])
    response = _post_action(admin_client, ApprovalRequest, "approve_selected", [request])
    assert response.status_code == 200
    assert [level for level, _ in _messages(response)] == [messages.ERROR]
    request.refresh_from_db()
    assert request.status == "denied"


def test_staff_with_only_the_view_permission_cannot_decide(client, drain_runs):
    client.force_login(make_user("viewer", is_staff=True, permissions=["view_approvalrequest"]))
    request = make_suspended_run(drain_runs)
    run = request.run
    response = _post_action(client, ApprovalRequest, "approve_selected", [request])
    assert response.status_code == 403
    request.refresh_from_db()
    assert (request.status, request.decided_by) == ("pending", None)
    assert Run.objects.get(pk=run.pk).status == "suspended"


# Support reads the approval records but cannot decide: no token, not even its start, and no decision action.


def test_support_sees_no_token_on_the_approval_page(support_client, drain_runs):
    request = make_suspended_run(drain_runs)
    content = support_client.get(_url(ApprovalRequest, "change", request.pk)).content.decode()
    assert "pay_expense" in content
    assert request.token[:12] not in content and token_preview(request.token) not in content


def test_support_sees_no_token_in_a_checkpoint(support_client, drain_runs):
    request = make_suspended_run(drain_runs)
    token = request.token
    content = _suspension_page(support_client, request.run)
    assert "pay_expense" in content
    assert token[:12] not in content and token_preview(token) not in content
    assert '"token": "(hidden)"' in content.replace("&quot;", '"')


def test_support_sees_no_token_in_a_journal_part(support_client, drain_runs):
    request = make_suspended_run(drain_runs)
    run, token = request.run, request.token
    content = support_client.get(_url(JournalEntry, "change", _request_part(run).pk)).content.decode()
    assert "pay_expense" in content
    assert token[:12] not in content and token_preview(token) not in content


def test_support_is_offered_no_decision_action(support_client, drain_runs):
    make_suspended_run(drain_runs)
    content = support_client.get(_url(ApprovalRequest, "changelist")).content.decode()
    assert "pay_expense" in content
    assert "approve_selected" not in content
    assert "deny_selected" not in content


@pytest.mark.parametrize("action", ["approve_selected", "deny_selected"])
def test_a_forged_decision_post_from_support_is_refused_and_decides_nothing(support_client, drain_runs, action):
    request = make_suspended_run(drain_runs)
    run = request.run
    response = _post_action(support_client, ApprovalRequest, action, [request])
    assert response.status_code == 403
    assert "You do not have permission to decide approval requests." in response.content.decode()
    request.refresh_from_db()
    assert (request.status, request.decided_by) == ("pending", None)
    assert Run.objects.get(pk=run.pk).status == "suspended"


def test_a_reviewer_sees_the_token_start_and_the_decision_actions(reviewer_staff, drain_runs):
    client, _ = reviewer_staff
    request = make_suspended_run(drain_runs)
    change = client.get(_url(ApprovalRequest, "change", request.pk)).content.decode()
    changelist = client.get(_url(ApprovalRequest, "changelist")).content.decode()
    assert token_preview(request.token) in change
    assert request.token not in change
    assert 'value="approve_selected"' in changelist and 'value="deny_selected"' in changelist


def test_a_reviewer_decides_in_the_admin(reviewer_staff, drain_runs):
    client, reviewer = reviewer_staff
    request = make_suspended_run(drain_runs)
    run = request.run
    response = _post_action(client, ApprovalRequest, "deny_selected", [request])
    request.refresh_from_db()
    assert (request.status, request.decided_by) == ("denied", reviewer)
    assert (messages.SUCCESS, "1 request(s) denied.") in _messages(response)
    assert Run.objects.get(pk=run.pk).status == "queued"


def test_cancel_action_cancels_the_run(admin_client, drain_runs):
    run = make_suspended_run(drain_runs).run
    _post_action(admin_client, Run, "cancel_selected", [run])
    assert Run.objects.get(pk=run.pk).status == "cancelled"
    assert ApprovalRequest.objects.get(run=run).status == "cancelled"


def test_the_cancel_action_records_the_admin_who_cancelled(admin_client, admin_user, drain_runs):
    run = make_suspended_run(drain_runs).run
    _post_action(admin_client, Run, "cancel_selected", [run])
    assert Run.objects.get(pk=run.pk).cancelled_by == admin_user


def test_resume_action_queues_a_failed_run(admin_client, paid_run):
    Run.objects.filter(pk=paid_run.pk).update(status="failed")
    _post_action(admin_client, Run, "resume_selected", [paid_run])
    assert Run.objects.get(pk=paid_run.pk).status == "queued"


def test_resume_action_reports_each_run_it_cannot_resume(admin_client, paid_run):
    response = _post_action(admin_client, Run, "resume_selected", [paid_run])
    assert response.status_code == 200
    errors = [text for level, text in _messages(response) if level == messages.ERROR]
    assert len(errors) == 1 and errors[0].startswith("r-paid: ")
    assert Run.objects.get(pk=paid_run.pk).status == "completed"


def test_checkpoints_cannot_be_added_changed_or_deleted(admin_user):
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    model_admin = site._registry[Checkpoint]
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)


def test_checkpoint_add_page_is_forbidden(admin_client):
    assert admin_client.get(_url(Checkpoint, "add")).status_code == 403


def test_runs_cannot_be_edited_through_the_form(admin_client, paid_run):
    admin_client.post(_url(Run, "change", paid_run.pk), {"status": "queued", "agent": "coder"})
    paid_run.refresh_from_db()
    assert (paid_run.status, paid_run.agent) == ("completed", "reimbursement")


def test_the_admins_run_list_tells_a_paid_run_from_a_denied_one(admin_client, drain_runs):
    make_paid_run(drain_runs, "r-paid")
    verdict(make_suspended_run(drain_runs, "r-denied"), approved=False, reason="not in the policy")
    drain_runs()
    response = admin_client.get(_url(Run, "changelist"))
    outcomes = {row.run_id: row for row in response.context["cl"].result_list}
    page = response.content.decode()
    assert set(outcomes) == {"r-paid", "r-denied"}
    assert "Paid " in page and "Denied: pay_expense" in page
