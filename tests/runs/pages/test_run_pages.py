"""The run pages as support staff read them: the list and one run's timeline."""

from __future__ import annotations

import pytest

from tests.factories import make_paid_run, make_queued_run, make_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def completed(drain_runs):
    """A reimbursement run whose payment was approved and made; returns its request."""
    return make_paid_run(drain_runs, "done-1").approval_requests.get()


def test_the_run_list_shows_each_run_with_its_state(support, drain_runs):
    make_queued_run("wait-1")
    drain_runs()
    make_queued_run("queued-1")
    response = support.get("/runs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'href="/runs/wait-1/"' in html and 'href="/runs/queued-1/"' in html
    assert "Waiting for review" in html
    assert html.index("queued-1") < html.index("wait-1")  # newest first


def test_the_run_list_filters_by_status(support, drain_runs):
    make_queued_run("wait-1")
    drain_runs()
    make_queued_run("queued-1")
    html = support.get("/runs/?status=suspended").content.decode()
    assert "wait-1" in html and "queued-1" not in html


def test_the_run_list_is_paginated_by_50(support):
    for number in range(51):
        make_queued_run(f"many-{number:02d}")
    first = support.get("/runs/").content.decode()
    second = support.get("/runs/?page=2").content.decode()
    assert (first.count('href="/runs/many-'), second.count('href="/runs/many-')) == (50, 1)
    assert 'href="/runs/many-00/"' in second


def test_run_pages_send_anonymous_visitors_to_the_sign_in_page(client):
    response = client.get("/runs/")
    assert (response.status_code, response.url) == (302, "/accounts/login/?next=/runs/")
    assert client.get("/runs/r1/").status_code == 302


def test_a_user_without_a_group_reads_no_one_elses_run(browser_for):
    make_queued_run("r1")  # started by no one in particular
    client = browser_for("plain")
    assert 'href="/runs/r1/"' not in client.get("/runs/").content.decode()
    assert client.get("/runs/r1/").status_code == 404


def test_an_unknown_run_is_404(support):
    assert support.get("/runs/no-such-run/").status_code == 404


@pytest.mark.parametrize("path", ["/runs/r1/", "/runs/r1/live/"])
def test_with_debug_on_anothers_run_answers_the_sites_404_page_not_djangos_url_list(browser_for, users, settings,
                                                                                    path):
    settings.DEBUG = True
    make_queued_run("r1", user=users["owner"])
    assert browser_for("owner").get(path).status_code == 200  # its creator reads it
    response = browser_for("plain").get(path)
    html = response.content.decode()
    assert response.status_code == 404 and "<h1>Not found</h1>" in html
    assert "URLconf" not in html and "urlpatterns" not in html.lower()


def test_the_live_page_keeps_its_route(support):
    make_queued_run("r1")
    response = support.get("/runs/r1/live/")
    assert response.status_code == 200
    assert 'data-run-id="r1"' in response.content.decode()


def test_a_waiting_run_says_what_it_waits_for_and_what_to_do(support, drain_runs):
    make_queued_run("wait-1")
    drain_runs()
    html = support.get("/runs/wait-1/").content.decode()
    assert 'data-state="waiting"' in html
    assert "A reviewer approves or denies the request in the console; then the run continues by itself." in html
    assert "Last confirmed event" in html
    assert 'href="/runs/wait-1/live/"' in html


def test_a_completed_runs_timeline_lists_its_steps_in_order(support, completed):
    response = support.get("/runs/done-1/")
    assert response.status_code == 200
    html = response.content.decode()
    steps = html.split('<ol class="steps">', 1)[1].split("</ol>", 1)[0]
    kinds = [chunk.split('"', 1)[0] for chunk in steps.split('data-kind="')[1:]]
    assert kinds == ["proposed", "approved", "attempted", "verified", "completed"]
    assert 'data-state="completed"' in html


def test_a_completed_runs_timeline_shows_legs_effects_and_technical_records(support, completed):
    html = support.get("/runs/done-1/").content.decode()
    assert html.count("<code>test-worker</code>") == 2  # the start leg and the verdict's leg
    assert 'data-status="verified"' in html
    assert "transaction_id" in html
    assert "<details>" in html and "checkpoint" in html
    assert completed.token not in html


def run_with_legs(run_id: str, status: str, legs: list[str] = (), effect_status: str | None = None):
    from runs.models import Effect, Leg

    run = make_run(run_id, status=status, owner_epoch=len(legs), worker_id="w-2")
    for number, kind in enumerate(legs, start=1):
        Leg.objects.create(run=run, number=number, kind=kind, owner_epoch=number, worker_id=f"w-{number}",
                           finish_reason="" if number == len(legs) else "lost")
    if effect_status:
        Effect.objects.create(run=run, operation_id=f"{run_id}:op", tool_call_id="call-1", tool_name="pay_expense",
                              fingerprint="f" * 64, request={}, status=effect_status, owner_epoch=1)
    return run


@pytest.mark.parametrize(
    ("status", "legs", "effect_status", "key", "control"),
    [
        ("queued", ["start"], None, "retry_scheduled", "Follow it live"),
        ("running", ["start", "recovery"], "unknown", "reconciling", "no duplicate submit"),
        ("completed", ["start", "recovery"], "verified", "recovered", "manage.py runs export"),
        ("failed", ["start"], None, "failed", "manage.py runs resume"),
        ("cancelled", ["start"], None, "cancelled", "None."),
        ("needs_review", ["start"], None, "needs_review", "manage.py runs resume"),
    ],
)
def test_the_state_box_names_the_recovery_state_and_its_control(support, status, legs, effect_status, key,
                                                                 control):
    run_with_legs("s-1", status, legs, effect_status)
    html = support.get("/runs/s-1/").content.decode()
    assert f'class="state-box" data-state="{key}"' in html
    assert control in html


def test_a_reconciling_effect_shows_as_being_checked_in_the_steps(support):
    run_with_legs("s-1", "running", ["start", "recovery"], "unknown")
    html = support.get("/runs/s-1/").content.decode()
    assert 'data-kind="attempted"' in html and 'data-kind="reconciling"' in html
    assert 'data-kind="verified"' not in html


def test_a_reconciled_effect_lists_reconciled_before_verified(support):
    from runs.models import Effect

    run_with_legs("s-1", "completed", ["start", "recovery"], "verified")
    Effect.objects.update(receipt={"transaction_id": "tx-1"}, outcome_source=Effect.Source.RECONCILIATION)
    html = support.get("/runs/s-1/").content.decode()
    assert html.index('data-kind="attempted"') < html.index('data-kind="reconciled"') < html.index(
        'data-kind="verified"')
