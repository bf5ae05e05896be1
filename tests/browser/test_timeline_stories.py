"""The timeline in headless Chromium against a real `manage.py serve`: a reviewer forks a paid run from step 1 on its
page, and the fork runs to completion as a new run linked to its origin, which lists it; support reads a run that
survived two SIGKILLs: two interruptions with their gaps, no leg "running". axe-core finds no serious violation on
these pages."""

from __future__ import annotations

import re
import signal
from urllib.parse import urlparse

import pytest
from selenium.webdriver.common.by import By

from approvals.models import ApprovalRequest
from runs.models import Leg, Run
from tests.browser.test_people import (  # noqa: F401 (fixtures)
    DESKTOP,
    axe_violations,
    click,
    confirm_in_the_console,
    people,
    server,
    shot,
    sign_in,
    text_of,
    texts_of,
    wait,
    wait_for_status,
    wait_live,
)
from tests.factories import make_queued_run
from tests.processes import wait_until


def serious(violations: list[dict]) -> list[dict]:
    return [v for v in violations if v["impact"] in {"serious", "critical"}]


@pytest.mark.browser
def test_a_reviewer_forks_a_paid_run_from_step_1_and_the_fork_completes_linked_to_its_origin(people, server, browser):
    make_queued_run("paid-1", user=people["olga"])
    wait_for_status("paid-1", "suspended")
    request = ApprovalRequest.objects.get(run__run_id="paid-1")
    sign_in(browser, server, "rita", f"/console/paid-1/{request.approval_id}/")
    confirm_in_the_console(browser, "approve", says="calls pay_expense once")
    wait_for_status("paid-1", "completed")

    browser.get(f"{server}runs/paid-1/")
    wait_live(browser)
    click(browser, "#run-records summary")
    steps = browser.execute_script(  # in one script: a live update may replace the records at any time
        "return [...document.querySelectorAll('#run-records button[data-fork-step]')].map((b) => b.dataset.forkStep)")
    assert steps == ["0", "1", "2"]
    assert serious(axe_violations(browser)) == []
    shot(browser, "timeline-fork-buttons")
    click(browser, '#run-records button[data-fork-step="1"]')

    wait(browser, lambda driver: urlparse(driver.current_url).path == "/runs/paid-1-fork-1/", 30)
    assert "forked from step 1 of run paid-1" in text_of(browser, ".messages")
    wait_live(browser)
    wait(browser, lambda driver: driver.execute_script(
        "return document.querySelector('#state-box')?.getAttribute('data-state')") == "completed")
    fork = Run.objects.get(run_id="paid-1-fork-1")
    assert (fork.status, fork.forked_from.run_id, fork.forked_from_step, fork.created_by) == (
        "completed", "paid-1", 1, people["rita"])
    assert not fork.effects.exists() and not ApprovalRequest.objects.filter(run=fork).exists()  # nothing paid again
    assert "Paid 84.20 EUR" in text_of(browser, "#run-story")
    assert serious(axe_violations(browser)) == []
    shot(browser, "timeline-of-a-fork")

    click(browser, "a.fork-origin")
    wait(browser, lambda driver: urlparse(driver.current_url).path == "/runs/paid-1/", 30)
    assert re.search(r"run paid-1-fork-1, from step 1 completed", " ".join(text_of(browser, "ul.forks").split()))


@pytest.mark.browser
def test_support_reads_a_run_that_survived_two_sigkills_as_two_interruptions_and_no_leg_running(
        people, serve, browser, workers):
    browser.set_window_size(*DESKTOP)
    url = serve("--workers", "0")
    make_queued_run("crash-twice", user=people["olga"])
    for name, fault in (("a", "after-step-checkpoint:1"), ("b", "after-model-decision")):
        assert workers(name, DEUZ_FAULT=fault).wait_exit() == -signal.SIGKILL
    third = workers("c")
    wait_until(lambda: Run.objects.get(run_id="crash-twice").status == "suspended", what="the third worker")
    third.stop()
    assert [leg.ended_at is None for leg in Leg.objects.filter(run__run_id="crash-twice")] == [True, True, False]

    sign_in(browser, url, "sue", "/runs/crash-twice/")
    states = browser.execute_script(
        "return [...document.querySelectorAll('#run-legs tr[data-leg-state]')].map((row) => row.dataset.legState)")
    assert states == ["interrupted", "interrupted", "finished"]
    assert "running" not in text_of(browser, "#run-legs")
    finishes = texts_of(browser, '#run-legs td[data-label="Finish"]')
    assert [re.search(r"leg (\d) took over \d+ s later", text)[1] for text in finishes[:2]] == ["2", "3"]
    told = re.findall(r"Interrupted: leg (\d): worker \S+ stopped after step (\d) \(last seen [\d:]+ UTC\); "
                      r"recovered \d+ s later by worker \S+ \(leg (\d)\)", " ".join(text_of(browser, "ol.steps").split()))
    assert told == [("1", "0", "2"), ("2", "1", "3")]
    assert serious(axe_violations(browser)) == []
    shot(browser, "timeline-two-interruptions")
