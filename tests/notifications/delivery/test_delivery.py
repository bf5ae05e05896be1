"""Delivering the outbox at least once: retries with growing delays while the receiver is down, one webhook-id per
event and subscription, attempts that never overlap, and nothing lost when a worker is killed between a change
and its delivery. Time is the outbox's clock, passed to each pass; no test waits for a retry."""

from __future__ import annotations

import signal
from collections import Counter
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from notifications.models import DeliveryAttempt, OutboxMessage
from notifications.services import outbox_attempt_finish, outbox_claim
from runs.models import Run
from tests.factories import make_queued_run, make_suspended_run, verdict
from tests.processes import WorkerProcess, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

FOUR_EVENTS = ["approval.requested", "run.suspended", "approval.decided", "run.completed"]


def paid_run_events(users, drain_runs, run_id: str = "r1") -> None:
    """The four events of an approved and paid reimbursement run, in the outbox."""
    verdict(make_suspended_run(drain_runs, run_id, user=users["owner"]), user=users["reviewer"])
    drain_runs()


def attempts_of(message: OutboxMessage) -> list[DeliveryAttempt]:
    return list(message.attempts.order_by("number"))


def test_a_receiver_down_for_a_while_gets_every_event_once_it_is_back(users, receiver, drain_runs, deliver):
    from notifications.services import webhook_subscription_create

    hooks = receiver(500, 500, 500, 500)  # up, but failing
    subscription = webhook_subscription_create(owner=users["owner"], url=hooks.url, events=FOUR_EVENTS)
    paid_run_events(users, drain_runs)
    start = timezone.now()
    assert deliver(now=start) == 4  # four 500s
    assert deliver(now=start) == 0  # none due again yet
    hooks.stop()  # down: the connection is refused
    assert deliver(now=start + timedelta(seconds=31)) == 4
    hooks.start()
    assert deliver(now=start + timedelta(seconds=31 + 59)) == 0  # the second retry waits twice as long
    assert deliver(now=start + timedelta(seconds=31 + 61)) == 4
    assert deliver(now=start + timedelta(days=2)) == 0  # every message is settled
    delivered = [d for d in hooks.deliveries if d.status == 204]
    assert sorted(d.verified(subscription.secret)["type"] for d in delivered) == sorted(FOUR_EVENTS)
    assert Counter(d.webhook_id for d in delivered).most_common(1)[0][1] == 1  # each webhook-id once
    # A retry repeats the webhook-id of its first attempt, so a receiver tells a repeat from a new event.
    assert {d.webhook_id for d in hooks.deliveries if d.status == 500} == {d.webhook_id for d in delivered}
    message = OutboxMessage.objects.get(event__type="run.completed")
    assert message.status == OutboxMessage.Status.DELIVERED
    assert [(a.number, a.status_code) for a in attempts_of(message)] == [(1, 500), (2, None), (3, 204)]
    assert attempts_of(message)[1].error.startswith("Could not connect")


def test_retries_wait_the_base_delay_then_twice_as_long_each_time(users, receiver, subscribe, drain_runs, deliver,
                                                                 settings):
    settings.DEUZ_WEBHOOK_RETRY_BASE_SECONDS = 10
    receiver_500 = receiver(*[500] * 6)
    subscribe(users["owner"], events=["run.suspended"], url=receiver_500.url)
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    now = timezone.now()
    for _ in range(5):
        deliver(now=now)
        now = OutboxMessage.objects.get().next_attempt_at
    waits = [(a.next_attempt_at - a.finished_at).total_seconds() for a in attempts_of(OutboxMessage.objects.get())]
    assert waits == [10, 20, 40, 80, 160]


def test_the_default_first_retry_waits_30_seconds(users, receiver, subscribe, drain_runs, deliver):
    subscribe(users["owner"], events=["run.suspended"], url=receiver(500).url)
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    deliver()
    (attempt,) = attempts_of(OutboxMessage.objects.get())
    assert (attempt.next_attempt_at - attempt.finished_at).total_seconds() == 30


def test_a_message_fails_after_its_retries_ran_for_24_hours(users, receiver, subscribe, drain_runs, deliver):
    subscribe(users["owner"], events=["run.suspended"], url=receiver(*[503] * 20).url)
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    message = OutboxMessage.objects.get()
    now = timezone.now()
    while message.status == OutboxMessage.Status.PENDING:
        deliver(now=now)
        message.refresh_from_db()
        now = message.next_attempt_at
    attempts = attempts_of(message)
    assert message.status == OutboxMessage.Status.FAILED
    # 30 s, 60 s, 120 s... : the 13th attempt is the first 24 hours or more after the event, and the last.
    assert len(attempts) == 13
    assert attempts[-2].started_at - message.created_at < timedelta(hours=24) <= (
        attempts[-1].started_at - message.created_at)
    assert attempts[-1].next_attempt_at is None and all(a.status_code == 503 for a in attempts)


def test_two_deliverers_never_make_the_same_attempt(users, subscribe, drain_runs):
    subscribe(users["owner"], events=["run.suspended"])
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    pk = OutboxMessage.objects.get().pk
    first = outbox_claim(message_pks=[pk], worker_id="a")
    assert outbox_claim(message_pks=[pk], worker_id="b") == []  # it is a's attempt now
    assert [claim.number for claim in first] == [1]


def test_a_lapsed_attempt_is_taken_over_and_its_late_answer_ignored(users, subscribe, drain_runs):
    subscribe(users["owner"], events=["run.suspended"])
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    pk = OutboxMessage.objects.get().pk
    (stale,) = outbox_claim(message_pks=[pk], worker_id="a")  # a dies, or hangs, during its attempt
    (fresh,) = outbox_claim(message_pks=[pk], worker_id="b", now=timezone.now() + timedelta(minutes=2))
    assert outbox_attempt_finish(claim=stale, status_code=204, error="", duration_ms=5) is None
    assert outbox_attempt_finish(claim=fresh, status_code=204, error="", duration_ms=5).status == "delivered"
    first, second = attempts_of(OutboxMessage.objects.get())
    assert (first.status_code, first.error) == (None, "The worker making this attempt stopped before it recorded "
                                                      "an answer.")
    assert (second.number, second.status_code, second.worker_id) == (2, 204, "b")


def test_a_deleted_subscription_is_sent_nothing_more(users, subscribe, hooks, drain_runs, deliver):
    subscription = subscribe(users["owner"])
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    subscription.delete()
    assert deliver() == 0
    assert hooks.deliveries == [] and not OutboxMessage.objects.exists()


def test_manage_py_notifications_deliver_makes_the_due_attempts(users, subscribe, hooks, drain_runs, capsys):
    subscription = subscribe(users["owner"], events=["approval.requested", "run.suspended"])
    make_suspended_run(drain_runs, "r1", user=users["owner"])
    call_command("notifications", "deliver")
    assert capsys.readouterr().out.strip() == "2 attempts made."
    assert sorted(d.verified(subscription.secret)["type"] for d in hooks.deliveries) == [
        "approval.requested", "run.suspended"]


def test_a_worker_killed_between_the_change_and_the_delivery_loses_nothing(users, subscribe, hooks, tmp_path):
    subscription = subscribe(users["owner"])
    make_queued_run("r-kill", user=users["owner"])
    # The worker runs the leg; its outbox finds the first event due, and the process is SIGKILLed there, before
    # anything is claimed or sent.
    killed = WorkerProcess("killed", tmp_path, DEUZ_FAULT="before-outbox-delivery")
    assert killed.wait_exit(timeout=60) == -signal.SIGKILL
    assert hooks.deliveries == []
    waiting = OutboxMessage.objects.filter(status=OutboxMessage.Status.PENDING, attempt_count=0)
    assert "approval.requested" in set(waiting.values_list("event__type", flat=True))
    survivor = WorkerProcess("survivor", tmp_path)
    try:
        wait_until(lambda: not OutboxMessage.objects.exclude(status=OutboxMessage.Status.DELIVERED).exists()
                   and Run.objects.get(run_id="r-kill").status == Run.Status.SUSPENDED
                   and OutboxMessage.objects.filter(event__type="run.suspended").exists(),
                   timeout=60, what="the survivor to deliver every event")
    finally:
        survivor.stop()
    payloads = [d.verified(subscription.secret) for d in hooks.deliveries]
    assert Counter(p["type"] for p in payloads) == Counter(["approval.requested", "run.suspended"])
    assert len({d.webhook_id for d in hooks.deliveries}) == len(hooks.deliveries)
    assert set(DeliveryAttempt.objects.values_list("worker_id", flat=True)) == {"survivor"}
