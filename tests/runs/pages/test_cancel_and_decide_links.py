"""The run pages for a busy queue: "Decide this request" links from the timeline and the live page to each waiting
request's decide page, for those who may decide it only; and "Cancel this run" asks to confirm, as Approve and Deny
do, before it cancels."""

from __future__ import annotations

import re

import pytest

from approvals.models import ApprovalRequest
from runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


def decide_links(html: str) -> list[str]:
    return re.findall(r'<a class="decide-link" href="([^"]+)">Decide this request', html)


@pytest.mark.parametrize("page", ["/runs/r1/", "/runs/r1/live/"])
def test_a_reviewer_gets_a_link_straight_to_the_decide_page(browser_for, suspended, page):
    reviewer = browser_for("reviewer")
    links = decide_links(reviewer.get(page).content.decode())
    assert links == [f"/console/r1/{suspended.approval_id}/"]
    assert reviewer.get(links[0]).status_code == 200


@pytest.mark.parametrize("role", ["owner", "support"])
@pytest.mark.parametrize("page", ["/runs/r1/", "/runs/r1/live/"])
def test_who_may_not_decide_gets_no_link(browser_for, suspended, role, page):
    assert decide_links(browser_for(role).get(page).content.decode()) == []


def test_a_decided_request_has_no_link_any_more(browser_for, suspended, decide):
    decide(suspended, approved=True, run=False)
    assert decide_links(browser_for("reviewer").get("/runs/r1/").content.decode()) == []


def test_cancel_first_asks_to_confirm_and_cancels_nothing(browser_for, suspended):
    response = browser_for("owner").post("/runs/r1/cancel/", {"reason": "Paid twice already"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "Cancel run <code>r1</code>?" in html and "Yes, cancel this run" in html
    assert '<input type="hidden" name="reason" value="Paid twice already">' in html
    assert "Its 1 request waiting for a verdict closes as cancelled with the run." in html
    assert Run.objects.get(run_id="r1").status == "suspended"


def test_confirming_cancels_with_the_reason(browser_for, suspended, users):
    response = browser_for("owner").post("/runs/r1/cancel/", {"reason": "Paid twice already", "confirm": "yes"})
    assert (response.status_code, response.url) == (302, "/runs/r1/")
    run = Run.objects.get(run_id="r1")
    assert (run.status, run.cancelled_by, run.cancel_reason) == ("cancelled", users["owner"], "Paid twice already")
    assert ApprovalRequest.objects.get(pk=suspended.pk).status == "cancelled"


def test_the_run_page_says_cancel_asks_first(browser_for, suspended):
    html = browser_for("owner").get("/runs/r1/").content.decode()
    assert '<button type="submit" class="danger">Cancel this run…</button>' in html
