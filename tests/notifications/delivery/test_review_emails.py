"""Emails to reviewers, sent from the webhooks' outbox: one per new request and reviewer who may decide it, none for
an agent whose run's creator decides, none to whoever turned them off, a link that opens the decide page, no token
and no input in the mail, a digest for busy queues, and exactly one email when the worker is SIGKILLed right after
the request was stored. Time is the outbox's clock, passed to each pass; no test waits for a digest's window."""

from __future__ import annotations

import email
import signal
from collections import Counter
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.core import mail
from django.core.checks import run_checks
from django.test import Client
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.roles import REVIEWERS_GROUP, SUPPORT_GROUP
from notifications.models import OutboxMessage
from notifications.services import email_preference_set
from runs.models import Run
from tests.factories import make_queued_run, make_suspended_run, make_user, verdict
from tests.processes import WorkerProcess, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PUBLIC = "https://deuz.example.com"


@pytest.fixture(autouse=True)
def review_emails(settings):
    settings.DEUZ_REVIEW_EMAILS = True
    settings.DEUZ_PUBLIC_URL = PUBLIC
    settings.DEUZ_REVIEW_EMAIL_DIGEST_SECONDS = 0


@pytest.fixture
def people(db):
    """Two reviewers and a superuser (who may decide), support and the run's owner (who may not), all with an
    address, and a reviewer without one."""
    return {
        "rita": make_user("rita", REVIEWERS_GROUP, email="rita@example.test"),
        "ravi": make_user("ravi", REVIEWERS_GROUP, email="ravi@example.test"),
        "root": make_user("root", is_staff=True, is_superuser=True, email="root@example.test"),
        "sue": make_user("sue", SUPPORT_GROUP, email="sue@example.test"),
        "olga": make_user("olga", email="olga@example.test"),
        "nomail": make_user("nomail", REVIEWERS_GROUP),
    }


def recipients() -> Counter:
    return Counter(address for message in mail.outbox for address in message.to)


def decide_link(body: str) -> str:
    return next(line.split("Decide it:", 1)[1].strip() for line in body.splitlines() if "Decide it:" in line)


def test_each_reviewer_who_may_decide_gets_one_email_per_request(people, drain_runs, deliver):
    make_suspended_run(drain_runs, "r1", user=people["olga"])
    make_suspended_run(drain_runs, "r2", user=people["olga"])
    deliver()
    deliver()  # a second pass sends nothing more
    assert recipients() == Counter({"rita@example.test": 2, "ravi@example.test": 2, "root@example.test": 2})
    assert sorted(m.subject for m in mail.outbox if m.to == ["rita@example.test"]) == [
        "Approval needed: pay_expense in run r1", "Approval needed: pay_expense in run r2"]


def test_no_email_for_an_agent_whose_runs_creator_decides(people, drain_runs, deliver):
    make_queued_run("chat-1", agent="assistant", user=people["olga"],
                    messages=[{"role": "user", "content": "Tell Ada the build is green"}])
    drain_runs()
    assert ApprovalRequest.objects.filter(run__run_id="chat-1", status="pending").exists()
    deliver()
    assert mail.outbox == []
    assert not OutboxMessage.objects.filter(channel=OutboxMessage.Channel.EMAIL).exists()


def test_whoever_approvals_roles_says_may_not_decide_is_not_emailed(people, drain_runs, deliver, monkeypatch):
    # The four-eyes rule (never the run's creator) lives in approvals.roles.approval_is_decidable_by: the recipients
    # are whoever it lets decide, so the rule has one home.
    from notifications import selectors

    rule = selectors.approval_is_decidable_by
    monkeypatch.setattr(selectors, "approval_is_decidable_by",
                        lambda *, user, run: user.username != "ravi" and rule(user=user, run=run))
    make_suspended_run(drain_runs, "r1", user=people["olga"])
    deliver()
    assert set(recipients()) == {"rita@example.test", "root@example.test"}


def test_a_reviewer_who_turned_the_emails_off_gets_none(people, drain_runs, deliver):
    email_preference_set(user=people["ravi"], review_requests=False)
    make_suspended_run(drain_runs, "r1", user=people["olga"])
    deliver()
    assert set(recipients()) == {"rita@example.test", "root@example.test"}


def test_turning_the_emails_off_stops_one_already_queued(people, drain_runs, deliver):
    make_suspended_run(drain_runs, "r1", user=people["olga"])
    email_preference_set(user=people["ravi"], review_requests=False)
    deliver()
    assert "ravi@example.test" not in recipients()
    skipped = OutboxMessage.objects.get(channel="email", recipient=people["ravi"])
    assert skipped.status == OutboxMessage.Status.SKIPPED


def test_the_email_says_what_waits_without_token_or_input(people, drain_runs, deliver):
    request = make_suspended_run(drain_runs, "r1", user=people["olga"])
    deliver()
    message = next(m for m in mail.outbox if m.to == ["rita@example.test"])
    body = message.body
    for fact in ("pay_expense", "r1", "reimbursement", "olga", f"{request.expires_at:%Y-%m-%d %H:%M} UTC"):
        assert fact in body
    assert request.token not in body and request.token[:16] not in body
    for value in request.tool_input.values():
        assert str(value) not in body, f"the input value {value!r} is in the email"
    assert message.extra_headers["Message-ID"].endswith("@deuz.example.com>")


def test_the_link_opens_the_decide_page_for_the_reviewer(people, drain_runs, deliver):
    request = make_suspended_run(drain_runs, "r1", user=people["olga"])
    deliver()
    link = decide_link(next(m for m in mail.outbox if m.to == ["rita@example.test"]).body)
    assert link.startswith(PUBLIC + "/")
    client = Client()
    client.force_login(people["rita"])
    page = client.get(urlsplit(link).path)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Approve or deny <code>pay_expense</code>?" in html and 'name="verdict" value="approve"' in html
    assert urlsplit(link).path == f"/console/r1/{request.approval_id}/"


def test_a_request_decided_before_its_email_went_out_is_not_mailed(people, drain_runs, deliver):
    request = make_suspended_run(drain_runs, "r1", user=people["olga"])
    verdict(request, user=people["rita"])
    deliver()
    assert mail.outbox == []
    assert set(OutboxMessage.objects.filter(channel="email").values_list("status", flat=True)) == {"skipped"}


def test_a_digest_sends_one_email_per_reviewer_per_window(people, drain_runs, deliver, settings):
    settings.DEUZ_REVIEW_EMAIL_DIGEST_SECONDS = 600
    make_suspended_run(drain_runs, "r1", user=people["olga"])
    make_suspended_run(drain_runs, "r2", user=people["olga"])
    make_suspended_run(drain_runs, "r3", user=people["olga"])
    deliver(now=timezone.now() + timedelta(seconds=590))
    assert mail.outbox == []  # the window is still open
    deliver(now=timezone.now() + timedelta(seconds=601))
    assert recipients() == Counter({"rita@example.test": 1, "ravi@example.test": 1, "root@example.test": 1})
    digest = next(m for m in mail.outbox if m.to == ["rita@example.test"])
    assert digest.subject == "3 approval requests wait for your verdict"
    assert [urlsplit(decide_link(line)).path.split("/")[2] for line in digest.body.splitlines()
            if "Decide it:" in line] == ["r1", "r2", "r3"]


def test_a_digest_lists_only_the_requests_still_waiting(people, drain_runs, deliver, settings):
    settings.DEUZ_REVIEW_EMAIL_DIGEST_SECONDS = 600
    verdict(make_suspended_run(drain_runs, "r1", user=people["olga"]), user=people["rita"])
    make_suspended_run(drain_runs, "r2", user=people["olga"])
    deliver(now=timezone.now() + timedelta(seconds=601))
    digest = next(m for m in mail.outbox if m.to == ["ravi@example.test"])
    assert digest.subject == "Approval needed: pay_expense in run r2"


def test_email_on_without_a_public_url_is_a_system_check_error(settings):
    settings.DEUZ_PUBLIC_URL = None
    assert "notifications.E001" in [message.id for message in run_checks()]
    settings.DEUZ_REVIEW_EMAILS = False
    assert "notifications.E001" not in [message.id for message in run_checks()]


def mails_in(folder: Path) -> list[email.message.Message]:
    """Every email the file back end wrote to ``folder`` (one file per connection, emails separated by a line of
    dashes)."""
    found = []
    for path in sorted(folder.glob("*.log")):
        for chunk in path.read_text().split("-" * 79):
            if chunk.strip():
                found.append(email.message_from_string(chunk.strip()))
    return found


def test_a_worker_killed_right_after_the_request_is_stored_still_sends_exactly_one_email(people, tmp_path):
    make_queued_run("r-kill", user=people["olga"])
    folder = tmp_path / "mail"
    env = {"EMAIL_URL": f"file://{folder}", "DEUZ_PUBLIC_URL": PUBLIC}
    # The worker stores the run's suspension with its request (and so the emails in the outbox), then is
    # SIGKILLed at once, before its deliverer sees them.
    killed = WorkerProcess("killed", tmp_path, DEUZ_FAULT="after-suspend", **env)
    assert killed.wait_exit(timeout=60) == -signal.SIGKILL
    assert ApprovalRequest.objects.filter(run__run_id="r-kill", status="pending").count() == 1
    assert mails_in(folder) == []
    assert OutboxMessage.objects.filter(channel="email", status="pending").count() == 3
    survivor = WorkerProcess("survivor", tmp_path, **env)
    try:
        wait_until(lambda: not OutboxMessage.objects.filter(channel="email", status="pending").exists()
                   and Run.objects.get(run_id="r-kill").status == Run.Status.SUSPENDED,
                   timeout=60, what="the survivor to send the emails")
    finally:
        survivor.stop()
    sent = mails_in(folder)
    assert Counter(message["To"] for message in sent) == Counter(
        {"rita@example.test": 1, "ravi@example.test": 1, "root@example.test": 1})
    assert ApprovalRequest.objects.filter(run__run_id="r-kill").count() == 1
    request = ApprovalRequest.objects.get(run__run_id="r-kill")
    assert {decide_link(m.get_payload(decode=True).decode()) for m in sent} == {
        f"{PUBLIC}/console/r-kill/{request.approval_id}/"}
