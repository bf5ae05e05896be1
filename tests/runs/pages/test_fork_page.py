"""The timeline's "Fork from here" (support and reviewers): a POST per checkpoint that starts a new run linked to its
origin; the origin lists its forks. Others who read the run see no button and are refused; others get 404."""

from __future__ import annotations

import re

import pytest

from runs.models import Run
from tests.factories import make_paid_run

pytestmark = pytest.mark.django_db(transaction=True)  # the sandbox pays from the tools' own threads

FORK = "/runs/r-paid/checkpoints/{step}/fork/"


@pytest.fixture
def origin(users, drain_runs) -> Run:
    return make_paid_run(drain_runs, user=users["owner"])


def fork_buttons(html: str) -> list[str]:
    return re.findall(r'data-fork-step="(\d+)"', html)


@pytest.mark.parametrize("role", ["support", "reviewer"])
def test_support_and_reviewers_see_one_fork_button_per_step(browser_for, origin, role):
    html = browser_for(role).get("/runs/r-paid/").content.decode()
    assert fork_buttons(html) == ["0", "1", "2"]  # six checkpoints, the last of each step
    assert 'action="/runs/r-paid/checkpoints/1/fork/"' in html


@pytest.mark.parametrize("role", ["support", "reviewer"])
def test_forking_from_the_page_starts_a_run_and_opens_its_page_linked_to_its_origin(browser_for, origin, role):
    browser = browser_for(role)
    response = browser.post(FORK.format(step=1), follow=True)
    fork = Run.objects.get(forked_from=origin)
    assert (fork.run_id, fork.forked_from_step, fork.status) == ("r-paid-fork-1", 1, Run.Status.QUEUED)
    assert response.redirect_chain == [("/runs/r-paid-fork-1/", 302)]
    html = response.content.decode()
    assert "forked from step 1 of run r-paid" in html
    assert '<a href="/runs/r-paid/" class="fork-origin">' in html


def test_the_origins_timeline_lists_its_forks(browser_for, origin):
    browser_for("reviewer").post(FORK.format(step=0))
    html = browser_for("support").get("/runs/r-paid/").content.decode()
    assert re.search(r'<ul class="forks">\s*<li><a href="/runs/r-paid-fork-1/">run <code>r-paid-fork-1</code></a>, '
                     r"from step 0", html)


def test_a_forks_inherited_tool_results_are_not_shown_as_sent_by_the_client(browser_for, origin):
    browser_for("reviewer").post(FORK.format(step=1))
    html = browser_for("support").get("/runs/r-paid-fork-1/").content.decode()
    assert "supplied by the client" not in html


def test_the_runs_creator_without_a_role_sees_no_fork_button_and_a_forged_post_is_403(browser_for, origin):
    owner = browser_for("owner")
    assert fork_buttons(owner.get("/runs/r-paid/").content.decode()) == []
    assert owner.post(FORK.format(step=1)).status_code == 403
    assert not Run.objects.filter(forked_from=origin).exists()


@pytest.mark.parametrize("role", ["plain", "staff"])
def test_a_user_who_may_not_read_the_run_gets_404(browser_for, origin, role):
    assert browser_for(role).post(FORK.format(step=1)).status_code == 404


def test_signing_in_comes_first(browser_for, origin):
    response = browser_for("anonymous").post(FORK.format(step=1))
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_step_with_no_checkpoint_is_404_and_a_get_is_405(browser_for, origin):
    reviewer = browser_for("reviewer")
    assert reviewer.post(FORK.format(step=9)).status_code == 404
    assert reviewer.get(FORK.format(step=1)).status_code == 405
    assert not Run.objects.filter(forked_from=origin).exists()


def test_a_fork_needs_the_csrf_token(browser_for, origin):
    assert browser_for("reviewer", enforce_csrf_checks=True).post(FORK.format(step=1)).status_code == 403


def test_a_forks_story_tells_its_history_apart_from_its_own_steps(browser_for, origin, drain_runs):
    """Forked from step 0 and run to its request: the origin's step 0 is its history, and its own step 0 (the
    payment it proposes, "at step 0" in the Steps) carries its own checkpoints."""
    browser_for("reviewer").post(FORK.format(step=0))
    drain_runs()
    html = browser_for("support").get("/runs/r-paid-fork-1/").content.decode()
    story = html.split('id="run-story"', 1)[1].split("</section>", 1)[0]
    headings = re.findall(r'class="story-step-heading">([^<]*?)\s*<', story)
    assert headings == ["From its history, step 0", "Step 0"]
    own = story.split("Step 0", 2)[-1]
    assert "pay_expense" in own and "checkpoint" in own and "Proposed: pay_expense</strong>: at step 0" in own
