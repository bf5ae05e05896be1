"""The console for a busy queue: waiting requests filtered by agent, tool, age and "expiring soon" (GET), 25 a page,
the filters kept in the page links; a filter that does not parse is a 400 that says so."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.console.views import QUEUE_PAGE_SIZE
from approvals.models import ApprovalRequest
from tests.factories import make_queued_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queue(users, drain_runs):
    """Waiting requests: reimbursement runs pay-new (asked now), pay-old (asked 5 hours ago), pay-ending (expires in
    20 minutes), and coder run fix-1 (run_shell)."""
    for run_id in ("pay-new", "pay-old", "pay-ending"):
        make_queued_run(run_id, user=users["owner"])
    make_queued_run("fix-1", agent="coder", user=users["owner"])
    drain_runs()
    now = timezone.now()
    ApprovalRequest.objects.filter(run__run_id="pay-old").update(issued_at=now - timedelta(hours=5))
    ApprovalRequest.objects.filter(run__run_id="pay-ending").update(expires_at=now + timedelta(minutes=20))
    assert ApprovalRequest.objects.filter(status="pending").count() == 4


def listed(response) -> list[str]:
    """The run ids of the waiting requests the page lists, in its order."""
    assert response.status_code == 200, response.content[:500]
    html = response.content.decode()
    pending = html.split('id="pending"', 1)[1].split('id="recent"', 1)[0]
    return re.findall(r'class="queue-item" data-approval-id="[^"]+" data-run-id="([^"]+)"', pending)


def test_without_filters_every_waiting_request_is_listed_newest_first(queue, browser_for):
    assert sorted(listed(browser_for("reviewer").get("/console/"))) == ["fix-1", "pay-ending", "pay-new", "pay-old"]


def test_the_agent_filter_keeps_that_agents_requests(queue, browser_for):
    assert listed(browser_for("reviewer").get("/console/?agent=coder")) == ["fix-1"]


def test_the_tool_filter_keeps_that_tools_requests(queue, browser_for):
    assert sorted(listed(browser_for("reviewer").get("/console/?tool=pay_expense"))) == [
        "pay-ending", "pay-new", "pay-old"]


def test_the_age_filter_keeps_requests_waiting_that_long(queue, browser_for):
    assert listed(browser_for("reviewer").get("/console/?age=4h")) == ["pay-old"]


def test_expiring_soon_keeps_those_ending_within_the_hour(queue, browser_for):
    assert listed(browser_for("reviewer").get("/console/?expiring=on")) == ["pay-ending"]


def test_filters_combine(queue, browser_for):
    assert listed(browser_for("reviewer").get("/console/?agent=reimbursement&age=1h")) == ["pay-old"]
    assert listed(browser_for("reviewer").get("/console/?agent=coder&tool=pay_expense")) == []


def test_an_unknown_filter_value_is_a_400_that_says_so(queue, browser_for):
    response = browser_for("reviewer").get("/console/?agent=nobody&age=forever")
    assert response.status_code == 400
    html = response.content.decode()
    assert "Unknown agent nobody." in html and "Unknown age forever" in html
    assert 'class="queue-item"' not in html


def test_the_page_links_keep_the_filters(users, drain_runs, browser_for):
    for number in range(QUEUE_PAGE_SIZE + 2):
        make_queued_run(f"r{number:02}", user=users["owner"])
    drain_runs(max_legs=100)
    browser = browser_for("reviewer")
    first = browser.get("/console/?agent=reimbursement&tool=pay_expense")
    assert len(listed(first)) == QUEUE_PAGE_SIZE
    link = re.search(r'<a rel="next" href="\?([^"]+)"', first.content.decode()).group(1).replace("&amp;", "&")
    assert sorted(link.split("&")) == ["agent=reimbursement", "page=2", "tool=pay_expense"]
    second = listed(browser.get(f"/console/?{link}"))
    assert len(second) == 2 and not set(second) & set(listed(first))


@pytest.mark.parametrize("role, answer", [("reviewer", 200), ("superuser", 200), ("support", 403), ("owner", 403)])
def test_only_deciders_filter_the_queue(queue, browser_for, role, answer):
    assert browser_for(role).get("/console/?agent=coder&expiring=on").status_code == answer
