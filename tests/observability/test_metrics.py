"""`GET /metrics` (issue 26): Prometheus's text format behind DEUZ_METRICS_TOKEN, counting durable facts from stored
rows, so a scrape after a run with an approval, a crash and a recovery shows exactly what happened."""

from __future__ import annotations

import io
import signal
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from approvals.models import ApprovalRequest
from runs.models import JournalEntry, Run
from tests.factories import make_paid_run, make_queued_run, make_suspended_run, make_user, verdict
from tests.processes import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "scrape-me-0123456789"


@pytest.fixture
def metrics_on(settings, monkeypatch):
    settings.DEUZ_METRICS_TOKEN = TOKEN
    # The journal's parts are folded once SETTLE old (observability.tallies); the tests' are folded at once.
    monkeypatch.setattr("observability.tallies.SETTLE", timedelta(0))


def scrape(client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, keyed by (name, sorted labels)."""
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_are_off_while_the_token_is_unset(client, settings):
    settings.DEUZ_METRICS_TOKEN = None
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", f"Token {TOKEN}", f"Basic {TOKEN}"])
def test_a_scrape_without_the_bearer_token_is_refused(client, metrics_on, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert TOKEN.encode() not in response.content


def test_a_signed_in_superuser_without_the_token_is_refused_too(client, metrics_on):
    client.force_login(make_user("root-user", is_staff=True, is_superuser=True))
    assert client.get("/metrics").status_code == 401


def test_an_approved_payment_moves_each_measure_by_what_happened(client, metrics_on, drain_runs):
    before = scrape(client)
    request = make_suspended_run(drain_runs, "m-wait")
    waiting = scrape(client)
    assert value(waiting, "deuz_runs", status="suspended", agent="reimbursement") == 1
    assert value(waiting, "deuz_approvals_pending") == 1
    assert value(waiting, "deuz_effects", status="proposed") + value(waiting, "deuz_effects", status="approved") == 0

    verdict(request)
    drain_runs()
    after = scrape(client)
    run = Run.objects.get(run_id="m-wait")
    assert value(after, "deuz_runs", status="completed", agent="reimbursement") == 1
    assert value(after, "deuz_runs", status="suspended", agent="reimbursement") == 0
    assert value(after, "deuz_approvals_pending") == 0
    assert value(after, "deuz_legs_total", kind="start") - value(before, "deuz_legs_total", kind="start") == 1
    assert value(after, "deuz_legs_total", kind="verdict") - value(before, "deuz_legs_total", kind="verdict") == 1
    assert value(after, "deuz_steps_total") - value(before, "deuz_steps_total") == run.step_index + 1
    assert value(after, "deuz_effects", status="verified") == 1
    assert value(after, "deuz_model_tokens_total", kind="input") == run.usage["input_tokens"] > 0
    assert value(after, "deuz_model_tokens_total", kind="output") == run.usage["output_tokens"] > 0
    assert value(after, "deuz_effect_duplicates_total") == 0


def test_a_second_run_for_a_paid_expense_counts_a_cross_run_replay(client, metrics_on, drain_runs):
    make_paid_run(drain_runs, "m-first")
    assert value(scrape(client), "deuz_effect_cross_run_replays_total") == 0
    make_paid_run(drain_runs, "m-second")  # approved too: its reviewer was shown the payment made
    samples = scrape(client)
    assert value(samples, "deuz_effect_cross_run_replays_total") == 1
    assert value(samples, "deuz_effects", status="verified") == 1  # one payment, whichever run asked


def test_the_oldest_pending_approval_is_aged(client, metrics_on, drain_runs):
    request = make_suspended_run(drain_runs, "m-old")
    ApprovalRequest.objects.filter(pk=request.pk).update(issued_at=request.issued_at.replace(year=2020))
    # Its expiry is what keeps it decidable: an old request still pending is counted with its whole age.
    assert value(scrape(client), "deuz_approval_pending_oldest_age_seconds") > 86_400


def test_a_crash_and_its_recovery_are_counted_from_the_stored_legs(client, metrics_on, workers):
    make_queued_run("m-crash")
    first = workers("a", DEUZ_FAULT="after-step-checkpoint:1")
    assert first.wait_exit() == -signal.SIGKILL
    second = workers("b")
    wait_until(lambda: Run.objects.get(run_id="m-crash").status == "suspended", what="the recovered run to suspend")
    second.stop()
    samples = scrape(client)
    assert value(samples, "deuz_legs_total", kind="recovery") == 1
    assert value(samples, "deuz_recovery_seconds_count") == 1
    # The dead leg's last part came before the continuation started, within the lease (2 s in tests) and its
    # claim's margin.
    assert 0 < value(samples, "deuz_recovery_seconds_sum") < 30
    assert value(samples, "deuz_recovery_seconds_bucket", le="+Inf") == 1


def test_open_streams_are_counted_in_this_process(client, metrics_on):
    from runs.wire import followers

    assert value(scrape(client), "deuz_followers_open") == followers.open_followers() == 0


def test_model_and_tool_calls_are_counted_from_the_journal(client, metrics_on, drain_runs):
    make_paid_run(drain_runs, "m-calls")
    samples = scrape(client)
    steps = Run.objects.get(run_id="m-calls").step_index + 1
    # The reimbursement agent: a model call a step; it looked the expense up, then paid it once approved.
    assert value(samples, "deuz_model_calls_total", provider="deuz.scripted", outcome="ok") == steps
    assert value(samples, "deuz_tool_calls_total", tool="lookup_expense", outcome="ok") == 1
    assert value(samples, "deuz_tool_calls_total", tool="pay_expense", outcome="ok") == 1
    # The step that asked to pay ended its leg waiting for a reviewer: only the steps that finished are timed.
    assert value(samples, "deuz_step_duration_seconds_count") == steps - 1
    assert value(samples, "deuz_step_duration_seconds_bucket", le="+Inf") == steps - 1


def test_a_second_scrape_counts_nothing_twice(client, metrics_on, drain_runs):
    make_paid_run(drain_runs, "m-twice")
    told = ("deuz_model_calls", "deuz_tool_calls", "deuz_step_duration")

    def calls(samples):
        return {key: sample for key, sample in samples.items() if key[0].startswith(told)}

    first = calls(scrape(client))
    assert first and calls(scrape(client)) == first


def test_a_denied_payment_counts_as_denied_not_as_made(client, metrics_on, drain_runs):
    verdict(make_suspended_run(drain_runs, "m-denied"), approved=False, reason="Not ours.")
    drain_runs()
    samples = scrape(client)
    assert value(samples, "deuz_tool_calls_total", tool="pay_expense", outcome="denied") == 1
    assert value(samples, "deuz_tool_calls_total", tool="pay_expense", outcome="ok") == 0
    assert value(samples, "deuz_tool_calls_total", tool="pay_expense", outcome="error") == 0


def test_pruned_runs_keep_their_counted_calls(client, metrics_on, drain_runs, settings):
    from django.core.management import call_command

    make_paid_run(drain_runs, "m-pruned")
    Run.objects.filter(run_id="m-pruned").update(updated_at=Run.objects.get(run_id="m-pruned").updated_at.replace(
        year=2020))
    call_command("runs", "prune", "--older-than", "30", stdout=io.StringIO())
    assert not JournalEntry.objects.filter(run__run_id="m-pruned").exists()
    samples = scrape(client)
    assert value(samples, "deuz_tool_calls_total", tool="pay_expense", outcome="ok") == 1
    assert value(samples, "deuz_steps_total") == Run.objects.get(run_id="m-pruned").step_index + 1
