"""People resolve an effect that needs review: retry, mark committed with a receipt, abandon; in the API, the
admin and the `runs` CLI, each recorded with who, when and why, and refused without the reviewers' permission."""

from __future__ import annotations

import json

import pytest
from django.core.management.base import CommandError
from django.urls import reverse

from approvals.services import reviewers_group_ensure
from demo.models import SandboxPayment
from runs.models import Effect, EffectTransition, Run
from runs.stores.sessions import DatabaseSessionStore
from tests.commands import runs_cli
from tests.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def resolve_url(run: Run, effect: Effect) -> str:
    return f"/api/runs/{run.run_id}/effects/{effect.operation_id}/resolve/"


def provider_receipt(run: Run) -> dict:
    return SandboxPayment.objects.get(operation_id__in=run.effects.values("operation_id")).receipt()


def last_tool_result(run_id: str) -> dict:
    messages = DatabaseSessionStore().load(run_id)["messages"]
    return [message for message in messages if message["role"] == "tool"][-1]["content"][0]


# ------------------------------------------------------------------------------------------------ API


def test_a_reviewer_marks_an_effect_committed_with_its_receipt_and_the_run_completes_with_it(
        needs_review_run, reviewer_client, drain_runs):
    run = needs_review_run()
    effect = run.effects.get()
    response = reviewer_client.post(resolve_url(run, effect), {"action": "commit", "receipt": provider_receipt(run),
                                                               "reason": "The bank statement shows it."},
                                    format="json")
    assert (response.status_code, response.json()["status"]) == (200, "committed")
    drain_runs()
    effect.refresh_from_db()
    assert (Run.objects.get(pk=run.pk).status, effect.status, SandboxPayment.objects.count()) == (
        "completed", "verified", 1)
    assert effect.receipt["transaction_id"] in last_tool_result(run.run_id)["output"]["transaction_id"]


def test_retry_attempts_again_with_the_same_operation_id(needs_review_run, reviewer_client, drain_runs):
    run = needs_review_run()
    effect = run.effects.get()
    response = reviewer_client.post(resolve_url(run, effect), {"action": "retry", "reason": "The provider is back."},
                                    format="json")
    assert response.status_code == 200
    drain_runs()
    effect.refresh_from_db()
    assert (effect.status, effect.attempts, SandboxPayment.objects.get().operation_id) == (
        "verified", 2, effect.operation_id)


def test_abandon_continues_the_run_with_an_error_result_saying_so(needs_review_run, reviewer_client, drain_runs):
    run = needs_review_run()
    effect = run.effects.get()
    reviewer_client.post(resolve_url(run, effect), {"action": "abandon", "reason": "Paid by hand instead."},
                         format="json")
    drain_runs()
    result = last_tool_result(run.run_id)
    assert Run.objects.get(pk=run.pk).status == "completed"
    assert result["is_error"] and "abandoned by rita: Paid by hand instead." in result["output"]


def test_a_resolution_is_recorded_with_who_when_and_why(needs_review_run, reviewer_client, reviewer):
    run = needs_review_run()
    effect = run.effects.get()
    reviewer_client.post(resolve_url(run, effect), {"action": "retry", "reason": "Provider back."}, format="json")
    transition = EffectTransition.objects.filter(effect=effect).last()
    assert (transition.actor_kind, transition.user, transition.actor, transition.note, transition.via) == (
        "person", reviewer, "rita", "Provider back.", "retry")
    assert transition.at is not None and transition.owner_epoch == Run.objects.get(pk=run.pk).owner_epoch


def test_a_user_without_the_reviewers_permission_is_refused_and_nothing_changes(needs_review_run, outsider_client):
    run = needs_review_run()
    effect = run.effects.get()
    response = outsider_client.post(resolve_url(run, effect), {"action": "retry", "reason": "x"}, format="json")
    effect.refresh_from_db()
    assert (response.status_code, effect.status) == (403, "needs_review")


def test_resolving_an_effect_that_does_not_need_review_is_a_conflict(approved_run, drain_runs, reviewer_client):
    run = approved_run()
    drain_runs()
    effect = run.effects.get()
    response = reviewer_client.post(resolve_url(run, effect), {"action": "retry", "reason": "x"}, format="json")
    assert (response.status_code, "verified" in response.json()["detail"]) == (409, True)


def test_an_unknown_effect_is_not_found(needs_review_run, reviewer_client):
    run = needs_review_run()
    response = reviewer_client.post(f"/api/runs/{run.run_id}/effects/nope/resolve/", {"action": "retry",
                                                                                      "reason": "x"}, format="json")
    assert response.status_code == 404


@pytest.mark.parametrize(("body", "field"), [
    ({"action": "undo", "reason": "x"}, "action"),
    ({"action": "retry"}, "reason"),
    ({"action": "commit", "reason": "x"}, "receipt"),
    ({"action": "commit", "reason": "x", "receipt": "tx-1"}, "receipt"),
])
def test_bad_input_is_a_400_naming_the_field(needs_review_run, reviewer_client, body, field):
    run = needs_review_run()
    response = reviewer_client.post(resolve_url(run, run.effects.get()), body, format="json")
    assert (response.status_code, field in response.json()) == (400, True)


def test_the_run_shows_its_effect_needing_review(needs_review_run, reviewer_client):
    run = needs_review_run()
    body = reviewer_client.get(f"/api/runs/{run.run_id}/").json()
    assert (body["status"], [effect["status"] for effect in body["effects"]]) == ("needs_review", ["needs_review"])


# ------------------------------------------------------------------------------------------------ admin


@pytest.fixture
def staff_reviewer(client, reviewer):
    reviewer.is_staff = True
    reviewer.save()
    client.force_login(reviewer)
    return client


def _action(client, action: str, effect: Effect, **extra):
    return client.post(reverse("admin:runs_effect_changelist"),
                       {"action": action, "_selected_action": [effect.pk], **extra}, follow=True)


def test_the_admin_asks_for_the_reason_before_resolving(needs_review_run, staff_reviewer):
    effect = needs_review_run().effects.get()
    response = _action(staff_reviewer, "resolve_retry", effect)
    effect.refresh_from_db()
    assert (response.status_code, "name=\"reason\"" in response.content.decode(), effect.status) == (
        200, True, "needs_review")


def test_the_admin_retry_action_resolves_with_the_reason(needs_review_run, staff_reviewer):
    effect = needs_review_run().effects.get()
    _action(staff_reviewer, "resolve_retry", effect, apply="1", reason="Provider back.")
    effect.refresh_from_db()
    assert (effect.status, effect.transitions.last().note) == ("approved", "Provider back.")


def test_the_admin_commit_action_needs_a_receipt(needs_review_run, staff_reviewer):
    effect = needs_review_run().effects.get()
    response = _action(staff_reviewer, "resolve_commit", effect, apply="1", reason="Seen.", receipt="")
    effect.refresh_from_db()
    assert (effect.status, "needs its receipt" in response.content.decode()) == ("needs_review", True)


def test_the_admin_commit_action_records_the_receipt(needs_review_run, staff_reviewer):
    run = needs_review_run()
    effect = run.effects.get()
    _action(staff_reviewer, "resolve_commit", effect, apply="1", reason="Seen.",
            receipt=json.dumps(provider_receipt(run)))
    effect.refresh_from_db()
    assert (effect.status, effect.receipt) == ("committed", provider_receipt(run))


def test_the_admin_offers_no_resolution_to_staff_without_the_permission(needs_review_run, client):
    needs_review_run()
    client.force_login(make_user("sam", is_staff=True, permissions=["view_effect"]))
    response = client.get(reverse("admin:runs_effect_changelist"))
    assert (response.status_code, "resolve_retry" in response.content.decode()) == (200, False)


def test_the_admin_effect_page_shows_the_ledger_transitions(needs_review_run, staff_reviewer):
    effect = needs_review_run().effects.get()
    content = staff_reviewer.get(reverse("admin:runs_effect_change", args=[effect.pk])).content.decode()
    assert "unknown &rarr; needs_review" in content and "read API is unavailable" in content


# ------------------------------------------------------------------------------------------------ CLI


def test_runs_resolve_marks_committed_with_a_receipt(needs_review_run, reviewer):
    run = needs_review_run()
    effect = run.effects.get()
    output = runs_cli("resolve", run.run_id, effect.operation_id, "--action", "commit", "--reason", "Statement.",
                   "--receipt", json.dumps(provider_receipt(run)), "--as", "rita")
    effect.refresh_from_db()
    assert (effect.status, effect.transitions.last().user) == ("committed", reviewer)
    assert "queued" in output


def test_runs_resolve_refuses_a_user_without_the_permission(needs_review_run, outsider):
    run = needs_review_run()
    effect = run.effects.get()
    with pytest.raises(CommandError, match="reviewer permission"):
        runs_cli("resolve", run.run_id, effect.operation_id, "--action", "retry", "--reason", "x", "--as", "oscar")
    effect.refresh_from_db()
    assert effect.status == "needs_review"


def test_runs_resolve_says_what_is_wrong_with_a_receipt_that_is_not_json(needs_review_run, reviewer):
    run = needs_review_run()
    with pytest.raises(CommandError, match="--receipt is not JSON"):
        runs_cli("resolve", run.run_id, run.effects.get().operation_id, "--action", "commit", "--reason", "x",
              "--receipt", "{tx", "--as", "rita")


def test_runs_show_prints_the_evidence_and_the_controls_of_an_effect_needing_review(needs_review_run):
    run = needs_review_run()
    output = runs_cli("show", run.run_id)
    assert "read API is unavailable" in output
    assert f"manage.py runs resolve {run.run_id} {run.effects.get().operation_id}" in output


def test_reviewers_hold_the_permission_to_resolve():
    group = reviewers_group_ensure()
    assert group.permissions.filter(codename="resolve_effect").exists()


# ------------------------------------------------------------------------------------------------ console


def _page(client, run: Run) -> str:
    return client.get(f"/runs/{run.run_id}/").content.decode()


def _console_resolve(client, run: Run, effect: Effect, **form):
    return client.post(reverse("run-effect-resolve", args=[run.run_id, effect.operation_id]), form, follow=True)


def test_the_run_page_shows_the_evidence_and_the_three_controls_to_a_reviewer(needs_review_run, client, reviewer):
    run = needs_review_run()
    client.force_login(reviewer)
    html = _page(client, run)
    assert "read API is unavailable" in html
    assert all(f'value="{action}"' in html for action in ("retry", "commit", "abandon"))


def test_the_run_page_shows_no_controls_to_support_staff(needs_review_run, client):
    run = needs_review_run()
    client.force_login(make_user("sam", is_staff=True, permissions=["view_every_run"]))
    html = _page(client, run)
    assert ("Needs review:" in html, 'value="retry"' in html) == (True, False)


def test_the_console_resolves_with_the_reviewers_reason(needs_review_run, client, reviewer):
    run = needs_review_run()
    effect = run.effects.get()
    client.force_login(reviewer)
    response = _console_resolve(client, run, effect, action="abandon", reason="Paid by hand.")
    effect.refresh_from_db()
    assert (effect.status, effect.transitions.last().user, "resolved, now failed" in response.content.decode()) == (
        "failed", reviewer, True)


def test_the_console_shows_why_a_resolution_was_refused(needs_review_run, client, reviewer):
    run = needs_review_run()
    effect = run.effects.get()
    client.force_login(reviewer)
    response = _console_resolve(client, run, effect, action="commit", reason="Seen.", receipt="{tx")
    effect.refresh_from_db()
    assert (response.status_code, effect.status, "not JSON" in response.content.decode()) == (
        200, "needs_review", True)


def test_the_console_refuses_a_user_without_the_permission(needs_review_run, client):
    run = needs_review_run()
    effect = run.effects.get()
    client.force_login(make_user("sam", is_staff=True))
    response = _console_resolve(client, run, effect, action="retry", reason="x")
    effect.refresh_from_db()
    assert (response.status_code, effect.status) == (403, "needs_review")


def test_the_recovery_receipt_carries_the_ordered_ledger_with_the_resolution(needs_review_run, reviewer_client):
    from runs.presenters.receipt import run_receipt

    run = needs_review_run()
    effect = run.effects.get()
    reviewer_client.post(resolve_url(run, effect), {"action": "retry", "reason": "Provider back."}, format="json")
    [exported] = run_receipt(Run.objects.get(pk=run.pk))["effects"]
    assert [t["to"] for t in exported["transitions"]] == [
        "proposed", "approved", "attempted", "unknown", "needs_review", "approved"]
    assert exported["transitions"][-1]["actor"] == "person rita"
