"""A run in JSON says what it came to: ``outcome`` (kind, one sentence, who decided it) and ``approvals`` (every
request of the run with its verdict), for runs approved, denied, expired, cancelled, needing review, failed, waiting."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import approval_expire_due
from tests.factories import make_queued_run, make_suspended_run, verdict
from tests.runs.execution import recordings as rec
from tests.runs.execution.conftest import provider  # noqa: F401 (a fixture: the demo agents on a local model API)
from tests.runs.runtime.local_api import JSONReply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def read(reviewer_client):
    def get(run_id: str) -> dict:
        answer = reviewer_client.get(f"/api/runs/{run_id}/")
        assert answer.status_code == 200, answer.content
        return answer.json()

    return get


def test_an_approved_payment_is_completed_by_its_approver(drain_runs, reviewer, read):
    verdict(make_suspended_run(drain_runs, "o-paid"), user=reviewer)
    drain_runs()
    outcome = read("o-paid")["outcome"]
    assert (outcome["kind"], outcome["by"]) == ("completed", "rita") and "Paid 84.20 EUR" in outcome["summary"]


def test_an_approved_request_is_listed_with_its_verdict_and_reviewer(drain_runs, reviewer, read):
    request = verdict(make_suspended_run(drain_runs, "o-paid"), user=reviewer)
    drain_runs()
    (told,) = read("o-paid")["approvals"]
    assert {key: told[key] for key in ("approval_id", "tool_name", "status", "verdict", "decided_by", "reason")} == {
        "approval_id": request.approval_id, "tool_name": "pay_expense", "status": "used", "verdict": "approved",
        "decided_by": "rita", "reason": ""}
    assert told["decided_at"] is not None


def test_a_denied_run_is_denied_by_its_reviewer_with_the_reason(drain_runs, reviewer, read):
    verdict(make_suspended_run(drain_runs, "o-no"), approved=False, reason="Receipt missing.", user=reviewer)
    drain_runs()
    run = read("o-no")
    assert (run["status"], run["outcome"]["kind"], run["outcome"]["by"]) == ("completed", "denied", "rita")
    assert "Receipt missing." in run["outcome"]["summary"]
    assert [(a["verdict"], a["reason"]) for a in run["approvals"]] == [("denied", "Receipt missing.")]


def test_an_expired_request_ends_its_run_denied_by_nobody(drain_runs, read):
    request = make_suspended_run(drain_runs, "o-late")
    ApprovalRequest.objects.filter(pk=request.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    approval_expire_due()
    drain_runs()
    run = read("o-late")
    assert (run["outcome"]["kind"], run["outcome"]["by"]) == ("denied", None)
    assert [(a["verdict"], a["decided_by"]) for a in run["approvals"]] == [("expired", None)]


def test_a_waiting_run_is_in_progress_with_its_request_undecided(drain_runs, read):
    make_suspended_run(drain_runs, "o-wait")
    run = read("o-wait")
    assert (run["outcome"]["kind"], run["outcome"]["by"]) == ("in_progress", None)
    assert [(a["status"], a["verdict"], a["decided_by"]) for a in run["approvals"]] == [("pending", None, None)]


def test_a_cancelled_run_is_cancelled_by_who_cancelled_it(drain_runs, owner, token_client, read):
    make_suspended_run(drain_runs, "o-stop", user=owner)
    assert token_client(owner).post("/api/runs/o-stop/cancel/", {"reason": "Wrong."}, format="json").status_code == 200
    run = read("o-stop")
    assert (run["outcome"]["kind"], run["outcome"]["by"]) == ("cancelled", "olga")
    assert [(a["status"], a["verdict"]) for a in run["approvals"]] == [("cancelled", None)]


def test_a_run_needing_review_says_so_decided_by_nobody(needs_review_run, read):
    needs_review_run("o-review")
    outcome = read("o-review")["outcome"]
    assert (outcome["kind"], outcome["by"]) == ("needs_review", None) and outcome["summary"].startswith("Needs review")


def test_a_failed_run_is_failed_with_its_reason(provider, drain_runs, read):  # noqa: F811
    provider(JSONReply(401, rec.UNAUTHORIZED_BODY))
    make_queued_run("o-bad")
    drain_runs()
    outcome = read("o-bad")["outcome"]
    assert (outcome["kind"], outcome["by"]) == ("failed", None) and "HTTP 401" in outcome["summary"]


def test_the_run_list_has_each_runs_outcome_and_approvals(drain_runs, reviewer, reviewer_client):
    verdict(make_suspended_run(drain_runs, "o-no"), approved=False, user=reviewer)
    drain_runs()
    (listed,) = reviewer_client.get("/api/runs/").json()["results"]
    assert (listed["outcome"]["kind"], [a["verdict"] for a in listed["approvals"]]) == ("denied", ["denied"])


def test_every_leg_of_a_run_needing_review_reports_the_three_usage_counters(needs_review_run, read):
    needs_review_run("o-review")
    legs = read("o-review")["legs"]
    assert [set(leg["usage"]) >= {"input_tokens", "output_tokens", "total_tokens"} for leg in legs] == [True] * len(legs)


def test_a_leg_that_ends_before_any_model_call_stores_the_three_counters(needs_review_run):
    from runs.models import Leg

    needs_review_run("o-review")
    assert all({"input_tokens", "output_tokens", "total_tokens"} <= set(leg.usage)
               for leg in Leg.objects.filter(run__run_id="o-review"))
