"""Each event type, fired by real runs of the demo agents and received by a local server that verifies it with
standardwebhooks: what it says, who gets it, and that it commits with the change it tells of."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import transaction
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import approval_expire_due
from notifications.models import OutboxEvent, OutboxMessage
from runs.models import Run
from runs.services.lifecycle import run_cancel
from tests.factories import make_queued_run, make_suspended_run, verdict

pytestmark = pytest.mark.django_db(transaction=True)


def received(hooks, subscription) -> list[dict]:
    """Every payload the receiver got, each verified with the subscription's secret."""
    return [delivery.verified(subscription.secret) for delivery in hooks.deliveries]


@pytest.fixture
def approved_and_paid(users, subscribe, drain_runs, deliver):
    """The owner's subscription, and their reimbursement run approved by the reviewer and paid."""
    subscription = subscribe(users["owner"])
    request = make_suspended_run(drain_runs, "r1", user=users["owner"])
    verdict(request, approved=True, user=users["reviewer"])
    drain_runs()
    deliver()
    return subscription, request


def test_an_approved_run_tells_suspended_requested_decided_and_completed(approved_and_paid, hooks):
    subscription, _ = approved_and_paid
    payloads = received(hooks, subscription)
    assert Counter(payload["type"] for payload in payloads) == Counter(
        ["approval.requested", "run.suspended", "approval.decided", "run.completed"])
    by_type = {payload["type"]: payload["data"] for payload in payloads}
    assert by_type["run.suspended"]["status"] == "suspended"
    assert by_type["run.suspended"]["pending_approvals"][0]["tool_name"] == "pay_expense"
    assert by_type["approval.requested"]["run_id"] == "r1"
    assert by_type["approval.requested"]["approval"]["status"] == "pending"
    assert by_type["approval.decided"]["approval"]["status"] == "approved"
    assert by_type["approval.decided"]["approval"]["decided_by"] == "rita"
    assert by_type["run.completed"]["status"] == "completed"


def test_each_event_is_delivered_once_in_order_of_its_changes(approved_and_paid):
    events = OutboxEvent.objects.filter(run__run_id="r1").order_by("occurred_at", "id")
    assert [event.type for event in events] == [
        "approval.requested", "run.suspended", "approval.decided", "run.completed"]
    assert set(OutboxMessage.objects.values_list("status", flat=True)) == {"delivered"}


def test_a_run_event_carries_the_run_as_the_api_shows_it_to_its_owner(approved_and_paid, hooks, token_client, users):
    subscription, _ = approved_and_paid
    completed = next(p for p in received(hooks, subscription) if p["type"] == "run.completed")
    answer = token_client(users["owner"]).get("/api/runs/r1/")
    assert completed["data"] == answer.json()


def test_no_payload_carries_an_approval_token(approved_and_paid, hooks):
    _, request = approved_and_paid
    token = ApprovalRequest.objects.get(pk=request.pk).token
    assert len(hooks.deliveries) == 4
    for delivery in hooks.deliveries:
        assert token.encode() not in delivery.body
        assert b'"token"' not in delivery.body


def test_a_denial_is_told_with_its_reason_and_the_run_ends(users, subscribe, hooks, drain_runs, deliver):
    subscription = subscribe(users["owner"], events=["approval.decided", "run.completed"])
    request = make_suspended_run(drain_runs, "r-deny", user=users["owner"])
    verdict(request, approved=False, reason="Not a business expense.", user=users["reviewer"])
    drain_runs()
    deliver()
    payloads = {payload["type"]: payload["data"] for payload in received(hooks, subscription)}
    assert payloads["approval.decided"]["approval"]["status"] == "denied"
    assert payloads["approval.decided"]["approval"]["reason"] == "Not a business expense."
    assert payloads["run.completed"]["run_id"] == "r-deny"
    assert payloads["run.completed"]["effects"] == []  # nothing was paid


def test_a_subscription_gets_only_the_event_types_it_names(users, subscribe, hooks, drain_runs, deliver):
    subscription = subscribe(users["owner"], events=["run.suspended"])
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    deliver()
    assert [payload["type"] for payload in received(hooks, subscription)] == ["run.suspended"]


def test_cancelling_a_waiting_run_tells_run_cancelled(users, subscribe, hooks, drain_runs, deliver):
    subscription = subscribe(users["owner"], events=["run.cancelled"])
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    run_cancel(run_id="r1", user=users["owner"])
    deliver()
    (payload,) = received(hooks, subscription)
    assert (payload["type"], payload["data"]["status"]) == ("run.cancelled", "cancelled")


def test_a_run_whose_payment_needs_review_tells_the_effect_and_the_run(users, subscribe, hooks, drain_runs, deliver,
                                                                      monkeypatch):
    subscription = subscribe(users["owner"], events=["effect.needs_review", "run.needs_review"])
    verdict(make_suspended_run(drain_runs, "r-review", user=users["owner"]), user=users["reviewer"])
    monkeypatch.setenv("DEUZ_SANDBOX_PAYMENTS", "commit-then-timeout,reads-unavailable")
    drain_runs()
    deliver()
    payloads = {payload["type"]: payload["data"] for payload in received(hooks, subscription)}
    assert payloads["effect.needs_review"]["run_id"] == "r-review"
    assert payloads["effect.needs_review"]["effect"]["tool_name"] == "pay_expense"
    assert payloads["effect.needs_review"]["effect"]["status"] == "needs_review"
    assert payloads["run.needs_review"]["status"] == "needs_review"


def test_a_run_that_fails_tells_run_failed(users, subscribe, hooks, drain_runs, deliver, settings):
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "broken": "tests.notifications.agents.broken_agent"}
    subscription = subscribe(users["owner"], events=["run.failed"])
    make_queued_run("r-broken", agent="broken", user=users["owner"])
    drain_runs()
    deliver()
    (payload,) = received(hooks, subscription)
    assert (payload["type"], payload["data"]["status"]) == ("run.failed", "failed")


def test_an_expired_request_is_told_as_decided_expired(users, subscribe, hooks, drain_runs, deliver):
    subscription = subscribe(users["owner"], events=["approval.decided"])
    request = make_suspended_run(drain_runs, "r1", user=users["owner"])
    ApprovalRequest.objects.filter(pk=request.pk).update(expires_at=timezone.now())
    assert approval_expire_due() == 1
    deliver()
    (payload,) = received(hooks, subscription)
    assert payload["data"]["approval"]["status"] == "expired"


def test_a_subscriber_who_may_not_read_the_run_gets_nothing(users, subscribe, hooks, drain_runs, deliver):
    subscribe(users["plain"])  # signed in, but the run is the owner's
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    deliver()
    assert hooks.deliveries == []
    assert not OutboxMessage.objects.exists()


def test_support_who_reads_every_run_gets_its_events(users, subscribe, hooks, drain_runs, deliver):
    subscription = subscribe(users["support"], events=["run.suspended"])
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    deliver()
    assert [payload["data"]["run_id"] for payload in received(hooks, subscription)] == ["r1"]


def test_the_right_to_read_is_checked_again_when_the_delivery_is_made(users, subscribe, hooks, drain_runs, deliver):
    subscribe(users["support"], events=["run.suspended"])
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    users["support"].groups.clear()  # support's role is taken away before the event is delivered
    deliver()
    assert hooks.deliveries == []
    message = OutboxMessage.objects.get()
    assert message.status == OutboxMessage.Status.SKIPPED
    assert "may no longer read" in message.attempts.get().error


def test_the_event_is_written_in_the_transaction_of_its_change(users, subscribe, drain_runs):
    subscribe(users["owner"], events=["run.cancelled"])
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    with pytest.raises(RuntimeError), transaction.atomic():
        run_cancel(run_id="r1", user=users["owner"])
        assert OutboxEvent.objects.filter(type="run.cancelled").count() == 1  # there, before the commit
        raise RuntimeError("the change rolls back")
    assert not OutboxEvent.objects.filter(type="run.cancelled").exists()
    assert Run.objects.get(run_id="r1").status == Run.Status.SUSPENDED


def test_a_broken_event_never_undoes_the_change(users, subscribe, drain_runs, monkeypatch):
    from notifications.publishing import receivers

    def broken(run):
        raise ValueError("rendering failed")

    monkeypatch.setattr(receivers, "run_data", broken)
    subscribe(users["owner"], events=["run.cancelled"])
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    run_cancel(run_id="r1", user=users["owner"])
    assert Run.objects.get(run_id="r1").status == Run.Status.CANCELLED
    assert not OutboxEvent.objects.filter(type="run.cancelled").exists()
