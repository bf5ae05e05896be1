"""Timelines that tell the truth: cancels with who and when, in order; outcomes; sub-agent calls and their
approvals inside the parent's story; a step's noisy records grouped under it."""

from __future__ import annotations

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest
from runs.models import Effect, Leg, Run
from runs.services.lifecycle import run_cancel
from tests.factories import make_run

pytestmark = pytest.mark.django_db(transaction=True)


def between(html: str, start: str, end: str) -> str:
    """The markup after the first ``start``, up to the next ``end``."""
    return html.split(start, 1)[1].split(end, 1)[0]


def steps_text(html: str) -> str:
    return between(html, '<ol class="steps">', "</ol>")


def step_kinds(html: str) -> list[str]:
    return [chunk.split('"', 1)[0] for chunk in steps_text(html).split('data-kind="')[1:]]


def test_a_cancelled_suspended_run_says_who_cancelled_it_and_when_in_order(support, suspended, users):
    run_cancel(run_id="r1", user=users["owner"])
    html = support.get("/runs/r1/").content.decode()
    assert step_kinds(html) == ["proposed", "cancelled", "withdrawn"]
    steps = steps_text(html)
    assert "Cancelled by olga" in steps and "the run was cancelled by olga" in steps
    assert "Superseded" not in steps
    run = Run.objects.get(run_id="r1")
    assert f'datetime="{run.cancelled_at.isoformat()}"' in steps  # dated at the cancel, not at the expiry


def test_a_running_run_cancelled_shows_the_request_then_the_stop(support, start, users):
    start("r2")
    Run.objects.filter(run_id="r2").update(status="running", owner_epoch=1)  # as a claim does
    leg = Leg.objects.create(run=Run.objects.get(run_id="r2"), number=1, kind="start", owner_epoch=1, worker_id="w")
    run_cancel(run_id="r2", user=users["superuser"])
    # The leg stopped between two deltas, after the cancel.
    Leg.objects.filter(pk=leg.pk).update(ended_at=timezone.now(), finish_reason="cancelled")
    Run.objects.filter(run_id="r2").update(status="cancelled", finish_reason="cancelled")
    html = support.get("/runs/r2/").content.decode()
    assert step_kinds(html) == ["cancel_requested", "cancelled"]
    assert "Cancel requested by root" in steps_text(html)


def test_a_cancelled_runs_unanswered_call_says_no_result_will_come(support, suspended, users):
    assert '<p class="call-pending">No result yet.</p>' in support.get("/runs/r1/").content.decode()
    run_cancel(run_id="r1", user=users["owner"])
    html = support.get("/runs/r1/").content.decode()
    assert '<p class="call-pending">No result: the run was cancelled before this call returned.</p>' in html
    assert "No result yet." not in html


def test_the_cancel_form_records_who_cancelled_and_why_and_the_page_names_both(browser_for, suspended, users):
    owner = browser_for("owner")
    owner.post("/runs/r1/cancel/", {"reason": "Paid twice already", "confirm": "yes"})
    run = Run.objects.get(run_id="r1")
    html = owner.get("/runs/r1/").content.decode()
    assert (run.status, run.cancelled_by, run.cancel_reason) == ("cancelled", users["owner"], "Paid twice already")
    assert "<dt>Cancelled by</dt><dd>olga, " in html
    assert '<dd class="cancel-reason">Paid twice already</dd>' in html


def test_a_cancel_forms_reason_too_long_is_said_and_cancels_nothing(browser_for, suspended):
    owner = browser_for("owner")
    response = owner.post("/runs/r1/cancel/", {"reason": "x" * 2001}, follow=True)
    assert Run.objects.get(run_id="r1").status == "suspended"
    assert "at most 2000 characters" in response.content.decode()


def test_the_run_page_names_the_canceller_in_its_summary(support, suspended, users):
    run_cancel(run_id="r1", user=users["owner"])
    html = support.get("/runs/r1/").content.decode()
    assert "<dt>Cancelled by</dt><dd>olga, " in html


def test_a_paid_run_reads_paid_and_a_denied_one_denied(support, start, drain_runs, decide):
    start("paid")
    start("denied")
    drain_runs()
    decide(ApprovalRequest.objects.get(run__run_id="paid"), approved=True)
    decide(ApprovalRequest.objects.get(run__run_id="denied"), approved=False, reason="Duplicate of exp-1041")
    assert set(Run.objects.values_list("status", flat=True)) == {"completed"}
    html = support.get("/runs/").content.decode()
    paid, denied = between(html, 'data-run-id="paid"', "</tr>"), between(html, 'data-run-id="denied"', "</tr>")
    assert 'data-outcome="committed"' in paid and "Paid 84.20 EUR to Ada Lovelace (tx-" in paid
    assert 'data-outcome="denied"' in denied and "Denied: pay_expense by rita (Duplicate of exp-1041)" in denied


@pytest.mark.parametrize(("status", "error", "legs", "says"), [
    ("failed", "The model refused.", ["start"], "Failed: The model refused."),
    ("needs_review", "The payment outcome is unknown.", ["start"], "Needs review: The payment outcome is unknown."),
    ("queued", "", ["start"], "Retry scheduled"),
])
def test_the_run_list_says_each_outcome(support, users, status, error, legs, says):
    run = make_run("o-1", status=status, error=error, created_by=users["owner"])
    for number, kind in enumerate(legs, start=1):
        Leg.objects.create(run=run, number=number, kind=kind, owner_epoch=number, worker_id="w", finish_reason="lost")
    row = between(support.get("/runs/").content.decode(), 'data-run-id="o-1"', "</tr>")
    assert says in row


def test_the_run_list_shows_the_creator_and_the_request(support, suspended):
    row = between(support.get("/runs/").content.decode(), 'data-run-id="r1"', "</tr>")
    assert '<td data-label="Started by">olga</td>' in row
    assert '<span class="request-text">Reimburse exp-1042</span>' in row


def test_a_sub_agents_call_and_its_approval_sit_inside_the_parents_story(support, start, drain_runs):
    start("c1", agent="coder")
    drain_runs()
    html = support.get("/runs/c1/").content.decode()
    story = between(html, 'id="run-story"', "</section>")
    call = story.split('data-sub-agent="coder"', 1)[1]
    assert "Sub-agent call: <code>coder</code>" in story
    assert 'data-agent-path="coder"' in call and 'data-tool="run_shell"' in call
    assert "Proposed: run_shell" in call
    assert "in the sub-agent coder" in steps_text(html)


def test_a_sub_agents_result_appears_under_its_call_once_it_ran(support, start, drain_runs, decide):
    start("c1", agent="coder")
    drain_runs()
    decide(ApprovalRequest.objects.get(run__run_id="c1"), approved=True)
    assert Run.objects.get(run_id="c1").status == "completed"
    story = between(support.get("/runs/c1/").content.decode(), 'id="run-story"', "</section>")
    shell = between(story, 'data-tool="run_shell"', 'class="call"')
    assert "Approved: run_shell" in shell and "3 passed" in shell


def test_a_steps_checkpoints_are_grouped_under_it_on_demand(support, suspended):
    story = between(support.get("/runs/r1/").content.decode(), 'id="run-story"', "</section>")
    first_step = between(story, 'data-step="0"', 'data-step="1"')
    assert '<details class="records">' in first_step and "checkpoint" in first_step


def test_the_technical_records_stay_behind_a_disclosure(support, suspended):
    html = support.get("/runs/r1/").content.decode()
    assert "<summary>Technical records:" in html


def test_an_effects_receipt_is_coloured_json(support, suspended, decide):
    decide(suspended, approved=True)
    effects = between(support.get("/runs/r1/").content.decode(), 'id="run-effects"', "</section>")
    assert Effect.objects.get().status == "verified"
    assert '<span class="json-key">&quot;transaction_id&quot;</span>' in effects
