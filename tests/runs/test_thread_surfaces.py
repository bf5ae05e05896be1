"""A run's thread and turn where people look: the admin (threads read-only for support), `runs show`, and the run's
timeline page with links to the thread's other turns."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from runs.models import Run
from runs.services.threads import thread_message_add, thread_start

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_turns(users):
    """The owner's thread t1: turn 1 completed (as if answered), turn 2 queued."""
    owner = users["owner"]
    thread_start(agent="reimbursement", user=owner, thread_id="t1")
    first = thread_message_add(thread_id="t1", content="Reimburse exp-1042", user=owner, run_id="turn-a")
    Run.objects.filter(pk=first.pk).update(status=Run.Status.COMPLETED)
    return first, thread_message_add(thread_id="t1", content="What did you pay?", user=owner, run_id="turn-b")


def test_runs_show_prints_the_thread_and_turn(two_turns):
    out = io.StringIO()
    call_command("runs", "show", "turn-b", stdout=out)
    assert "Thread:   t1, turn 2 of 2" in out.getvalue()


def test_the_timeline_links_the_other_turns_of_its_thread(two_turns, browser_for):
    page = browser_for("owner").get("/runs/turn-b/").content.decode()
    assert '<a href="/runs/turn-a/">turn 1</a>' in page
    assert '<span aria-current="page">turn 2 (this run)</span>' in page


def test_the_timeline_links_its_thread_to_the_chat_page_for_those_who_read_it(two_turns, browser_for):
    page = browser_for("support").get("/runs/turn-b/").content.decode()
    assert '<a href="/chat/t1/" class="thread-link"><code>t1</code></a>' in page  # the whole conversation
    assert browser_for("support").get("/chat/t1/").status_code == 200


def test_support_reads_threads_in_the_admin_and_changes_none(two_turns, browser_for):
    support = browser_for("support")
    assert "t1" in support.get("/admin/runs/thread/").content.decode()
    shown = support.get(f"/admin/runs/thread/{two_turns[0].thread.pk}/change/").content.decode()
    assert "turn-a" in shown and "turn-b" in shown
    assert support.post("/admin/runs/thread/add/", {}).status_code == 403


def test_staff_without_a_role_is_not_shown_threads(two_turns, browser_for):
    assert browser_for("staff").get("/admin/runs/thread/").status_code == 403
