"""A run and its legs are told as of one moment: a run read as queued, then claimed by a worker before its legs
are read (the 201 of a start or a fork, answered while a worker takes the run at once), is not told with a leg
that seems to have died, nor as a retry."""

from __future__ import annotations

import pytest

from runs.models import Run
from runs.presenters.leg_ends import run_leg_ends
from runs.presenters.outcome import run_outcome_get
from runs.selectors import run_leg_list
from runs.services.lifecycle import run_claim
from tests.factories import make_queued_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def read_then_claimed() -> Run:
    """Run q1 as read when it was queued; a worker claimed it right after."""
    make_queued_run("q1")
    read = Run.objects.get(run_id="q1")
    assert run_claim(worker_id="w-fast", run_id="q1")
    return read


def test_a_leg_claimed_after_the_run_was_read_is_not_told_interrupted(read_then_claimed):
    ends = run_leg_ends(read_then_claimed, list(run_leg_list(run=read_then_claimed)))
    assert [end.state for end in ends if end.is_interrupted] == []


def test_a_run_read_as_queued_has_the_outcome_queued_not_a_retry(read_then_claimed):
    assert run_outcome_get(read_then_claimed).label == "Queued"


def test_the_run_read_again_has_its_running_leg(read_then_claimed):
    fresh = Run.objects.get(run_id="q1")
    assert [(end.number, end.state) for end in run_leg_ends(fresh, list(run_leg_list(run=fresh)))] == [(1, "running")]
