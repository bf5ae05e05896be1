"""The run list's search and filters: run id, agent, status, creator and date; a filter that does not parse is
said, and shows nothing rather than everything."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Run
from tests.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(users):
    def make(run_id, *, agent="reimbursement", status="completed", user="owner", days_ago=0):
        run = make_run(run_id, agent=agent, status=status, created_by=users[user] if user else None)
        Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(days=days_ago))
        return run

    make("pay-old", days_ago=10)
    make("pay-new", status="suspended")
    make("code-1", agent="coder", user="plain")
    make("code-2", agent="coder", status="failed", user=None)


def listed(response) -> list[str]:
    html = response.content.decode()
    return sorted(chunk.split('"', 1)[0] for chunk in html.split('data-run-id="')[1:])


@pytest.mark.parametrize(("query", "expected"), [
    ("", ["code-1", "code-2", "pay-new", "pay-old"]),
    ("q=pay-", ["pay-new", "pay-old"]),
    ("q=PAY-NEW", ["pay-new"]),
    ("agent=coder", ["code-1", "code-2"]),
    ("status=suspended", ["pay-new"]),
    ("creator=olga", ["pay-new", "pay-old"]),
    ("creator=OLGA&agent=reimbursement&status=completed", ["pay-old"]),
    ("since={week_ago}", ["code-1", "code-2", "pay-new"]),
    ("until={week_ago}", ["pay-old"]),
    ("since={today}&until={today}", ["code-1", "code-2", "pay-new"]),
    ("q=nothing-like-this", []),
])
def test_the_list_searches_and_filters(support, runs, query, expected):
    today = timezone.now().date()
    query = query.format(today=today, week_ago=today - timedelta(days=7))
    response = support.get(f"/runs/?{query}")
    assert response.status_code == 200
    assert listed(response) == expected


@pytest.mark.parametrize(("query", "says"), [
    ("status=bogus", "Unknown status bogus: choose one of queued, running, suspended"),
    ("agent=nobody", "Unknown agent nobody."),
    ("since=yesterday", "Enter a date as YYYY-MM-DD."),
    ("since=2026-02-02&until=2026-01-01", "The From date is after the To date."),
])
def test_a_filter_that_does_not_parse_is_said_and_shows_no_runs(support, runs, query, says):
    response = support.get(f"/runs/?{query}")
    assert response.status_code == 400
    html = response.content.decode()
    assert 'role="alert"' in html and says in html
    assert listed(response) == []


def test_a_plain_user_filters_among_their_own_runs_only(browser_for, runs):
    assert listed(browser_for("owner").get("/runs/?agent=coder")) == []
    assert listed(browser_for("plain").get("/runs/")) == ["code-1"]


def test_the_filters_keep_their_values_in_the_form(support, runs):
    html = support.get("/runs/?q=pay&status=suspended").content.decode()
    assert 'name="q" value="pay"' in html
    assert '<option value="suspended" selected>' in html


def test_pages_keep_the_filters(support, users):
    for number in range(51):
        make_run(f"many-{number:02d}", agent="coder", status="completed")
    html = support.get("/runs/?agent=coder").content.decode()
    assert 'rel="next" href="?agent=coder&amp;page=2"' in html
    assert len(listed(support.get("/runs/?agent=coder&page=2"))) == 1


def test_no_match_is_said(support, runs):
    assert "No run matches these filters." in support.get("/runs/?q=zzz").content.decode()
