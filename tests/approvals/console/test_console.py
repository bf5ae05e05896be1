"""The reviewers' console: who may see it, deciding through it, and what it shows of requests it cannot decide."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from approvals.models import ApprovalRequest
from runs.models import Effect, Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reviewer(users):
    return users["reviewer"]


@pytest.fixture
def outsider(users):
    """Signed in, staff, but not a reviewer."""
    return users["staff"]


@pytest.fixture
def reviewer_browser(browser_for) -> Client:
    return browser_for("reviewer")


def confirmed(verdict: str, **fields: str) -> dict:
    """A verdict form as posted from the confirmation step."""
    return {"verdict": verdict, "confirm": "yes", **fields}


def detail_url(request: ApprovalRequest) -> str:
    return f"/console/{request.run.run_id}/{request.approval_id}/"


def test_the_queue_lists_a_pending_request_with_its_exact_input(reviewer_browser, suspended):
    response = reviewer_browser.get("/console/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "pay_expense" in html
    assert '<span class="json-key">&quot;expense_id&quot;</span>: <span class="json-string">&quot;exp-1042&quot;</span>' in html
    assert 'href="/runs/r1/"' in html
    assert f'href="{detail_url(suspended)}"' in html


def test_an_anonymous_visitor_is_sent_to_the_sign_in_page(client):
    response = client.get("/console/")
    assert (response.status_code, response.url) == (302, "/accounts/login/?next=/console/")


def test_a_user_without_the_permission_is_refused(client, outsider, suspended):
    client.force_login(outsider)
    assert client.get("/console/").status_code == 403
    assert client.post(detail_url(suspended), confirmed("approve")).status_code == 403
    assert ApprovalRequest.objects.get(pk=suspended.pk).status == "pending"


def test_a_superuser_may_use_the_console(browser_for):
    assert browser_for("superuser").get("/console/").status_code == 200


def test_approving_in_the_console_queues_the_run_and_it_pays_once(reviewer_browser, reviewer, suspended, drain_runs):
    response = reviewer_browser.post(detail_url(suspended), confirmed("approve"), follow=True)
    assert response.redirect_chain == [("/console/", 302)]
    assert "pay_expense in run r1 approved." in response.content.decode()
    request = ApprovalRequest.objects.get(pk=suspended.pk)
    assert (request.status, request.decided_by, Run.objects.get(run_id="r1").status) == ("approved", reviewer, "queued")
    drain_runs()
    assert Run.objects.get(run_id="r1").status == "completed"
    assert list(Effect.objects.values_list("status", flat=True)) == ["verified"]


def test_denying_records_the_reason(reviewer_browser, suspended):
    response = reviewer_browser.post(detail_url(suspended), confirmed("deny", reason="Duplicate of exp-1041"))
    assert response.status_code == 302
    request = ApprovalRequest.objects.get(pk=suspended.pk)
    assert (request.status, request.reason) == ("denied", "Duplicate of exp-1041")


def test_a_second_verdict_answers_409_and_changes_nothing(reviewer_browser, suspended):
    reviewer_browser.post(detail_url(suspended), confirmed("deny", reason="no"))
    before = ApprovalRequest.objects.get(pk=suspended.pk)
    response = reviewer_browser.post(detail_url(suspended), confirmed("approve"))
    assert response.status_code == 409
    assert "Denied by rita" in response.content.decode()
    after = ApprovalRequest.objects.get(pk=suspended.pk)
    assert (after.status, after.reason, after.decided_at) == ("denied", "no", before.decided_at)


def test_the_console_posts_need_a_csrf_token(reviewer, suspended):
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    assert client.post(detail_url(suspended), confirmed("approve")).status_code == 403
    assert ApprovalRequest.objects.get(pk=suspended.pk).status == "pending"


def test_an_unknown_verdict_is_refused(reviewer_browser, suspended):
    assert reviewer_browser.post(detail_url(suspended), confirmed("maybe")).status_code == 400
    assert ApprovalRequest.objects.get(pk=suspended.pk).status == "pending"


def test_an_expired_request_shows_as_expired_without_a_form(reviewer_browser, suspended):
    ApprovalRequest.objects.filter(pk=suspended.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    html = reviewer_browser.get(detail_url(suspended)).content.decode()
    assert "Expired without a verdict" in html
    assert 'name="verdict"' not in html
    queue = reviewer_browser.get("/console/").content.decode()
    pending_section = queue.split('id="recent-heading"', 1)[0]
    assert "pay_expense" not in pending_section
    assert 'data-state="expired"' in queue


def test_posting_on_an_expired_request_answers_409_and_records_the_expiry(reviewer_browser, suspended):
    ApprovalRequest.objects.filter(pk=suspended.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    response = reviewer_browser.post(detail_url(suspended), confirmed("approve"))
    assert response.status_code == 409
    assert ApprovalRequest.objects.get(pk=suspended.pk).status == "expired"


def test_a_superseded_request_shows_as_superseded_without_a_form(reviewer_browser, suspended):
    ApprovalRequest.objects.filter(pk=suspended.pk).update(status="superseded")
    html = reviewer_browser.get(detail_url(suspended)).content.decode()
    assert "Superseded by a newer request" in html
    assert 'name="verdict"' not in html


def test_the_token_never_appears_in_full(reviewer_browser, suspended, drain_runs):
    token = suspended.token
    pages = [reviewer_browser.get("/console/"), reviewer_browser.get(detail_url(suspended))]
    reviewer_browser.post(detail_url(suspended), confirmed("approve"))
    drain_runs()
    pages += [reviewer_browser.get("/console/"), reviewer_browser.get(detail_url(suspended)),
              reviewer_browser.get("/runs/r1/"), reviewer_browser.get("/runs/")]
    assert [page.status_code for page in pages] == [200] * 6
    assert len(token) > 12
    assert not [page for page in pages if token in page.content.decode()]
    assert not [page for page in pages if token[:12] in page.content.decode()]  # not even its start


def test_an_unknown_request_is_404(reviewer_browser, suspended):
    assert reviewer_browser.get("/console/r1/no-such-approval/").status_code == 404
