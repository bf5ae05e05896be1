"""A timeline that shows every crash: a run whose worker is SIGKILLed twice (real worker processes, as in
tests/runs/execution/test_worker_crashes.py) reads two interruptions with their gaps, and no leg "running", on its
page, in `runs show` and in the API's legs; a reader who may not read the run gets 404."""

from __future__ import annotations

import json
import re
import signal

import pytest

from runs.models import Leg, Run
from tests.commands import runs_cli
from tests.factories import make_queued_run
from tests.processes import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def between(html: str, start: str, end: str) -> str:
    return html.split(start, 1)[1].split(end, 1)[0]


@pytest.fixture
def twice_killed(workers, users) -> Run:
    """A run whose first worker was SIGKILLed after step 0's checkpoint and whose second was SIGKILLed after the
    model asked for the payment at step 1; the third took it to its approval."""
    make_queued_run("crash-twice", user=users["owner"])
    for name, fault in (("a", "after-step-checkpoint:1"), ("b", "after-model-decision")):
        assert workers(name, DEUZ_FAULT=fault).wait_exit() == -signal.SIGKILL
    third = workers("c")
    wait_until(lambda: Run.objects.get(run_id="crash-twice").status == "suspended", what="the third worker")
    third.stop()
    legs = Leg.objects.filter(run__run_id="crash-twice")
    assert [(leg.kind, leg.ended_at is None) for leg in legs] == [("start", True), ("recovery", True),
                                                                  ("recovery", False)]
    return Run.objects.get(run_id="crash-twice")


def test_a_run_killed_twice_shows_two_interrupted_legs_and_none_running(twice_killed, browser_for):
    html = browser_for("owner").get("/runs/crash-twice/").content.decode()
    legs = between(html, 'id="run-legs"', "</section>")
    assert re.findall(r'data-leg-state="(\w+)"', legs) == ["interrupted", "interrupted", "finished"]
    assert "running" not in legs
    assert len(re.findall(r"interrupted, detected <time[^>]*>[\d:]+</time> \(last seen <time", legs)) == 2
    assert re.findall(r"leg (\d) took over \d+ s later", legs) == ["2", "3"]


def test_the_steps_tell_each_interruption_with_its_gap_and_who_recovered(twice_killed, browser_for):
    steps = between(browser_for("support").get("/runs/crash-twice/").content.decode(), '<ol class="steps">', "</ol>")
    told = re.findall(r"Interrupted: leg (\d)</strong>: worker (\S+) stopped after step (\d) \(last seen [\d:]+ UTC\); "
                      r"recovered (\d+) s later by worker (\S+) \(leg (\d)\)", steps)
    assert [(leg, step, next_leg) for leg, _, step, _, _, next_leg in told] == [("1", "0", "2"), ("2", "1", "3")]
    workers_of = dict(Leg.objects.filter(run=twice_killed).values_list("number", "worker_id"))
    assert [(died, went_on) for _, died, _, _, went_on, _ in told] == [(workers_of[1], workers_of[2]),
                                                                       (workers_of[2], workers_of[3])]


def test_runs_show_ends_the_killed_legs_interrupted_with_their_gaps(twice_killed):
    output = runs_cli("show", "crash-twice")
    legs = output.split("Legs")[1].split("Effects")[0]
    rows = [line.split() for line in legs.splitlines()[3:6]]
    assert [row[-2] for row in rows] == ["interrupted", "interrupted", "suspended"]  # FINISH, then ERROR
    assert "running" not in legs
    assert re.findall(r"Leg (\d) interrupted: worker \S+ stopped after step \d \(last seen [\d:]+ UTC\); recovered "
                      r"\d+ s later by worker \S+ \(leg (\d)\)", legs) == [("1", "2"), ("2", "3")]


def test_the_apis_legs_say_how_the_killed_legs_ended(twice_killed, token_client, users):
    legs = token_client(users["owner"]).get("/api/runs/crash-twice/").json()["legs"]
    assert [leg["ended_at"] is None for leg in legs] == [True, True, False]  # as stored
    told = [leg["interruption"] for leg in legs]
    assert told[2] is None
    assert [(item["last_step"], item["next_leg"]) for item in told[:2]] == [(0, 2), (1, 3)]
    assert all(item["gap_seconds"] >= 0 and item["detected_at"] >= item["last_seen_at"] for item in told[:2])


def test_a_user_who_may_not_read_the_run_gets_404(twice_killed, browser_for):
    assert browser_for("plain").get("/runs/crash-twice/").status_code == 404


def test_the_metric_counts_both_recoveries(twice_killed, token_client, users):
    recovery = token_client(users["reviewer"]).get("/api/metrics/").json()["recovery_completion_seconds"]
    assert recovery["count"] == 2 and recovery["max"] >= 0


def test_the_running_leg_of_a_running_run_reads_running(browser_for, users):
    run = make_queued_run("r-running", user=users["owner"])
    Run.objects.filter(pk=run.pk).update(status="running", owner_epoch=1)
    Leg.objects.create(run=run, number=1, kind="start", owner_epoch=1, worker_id="w")
    legs = between(browser_for("owner").get("/runs/r-running/").content.decode(), 'id="run-legs"', "</section>")
    assert re.findall(r'data-leg-state="(\w+)"', legs) == ["running"]


def test_a_leg_left_open_on_a_run_that_stopped_running_reads_interrupted(browser_for, users):
    run = make_queued_run("r-stopped", user=users["owner"])
    Leg.objects.create(run=run, number=1, kind="start", owner_epoch=1, worker_id="w")
    Run.objects.filter(pk=run.pk).update(status="failed", owner_epoch=1)  # by an operator, say
    html = browser_for("owner").get("/runs/r-stopped/").content.decode()
    assert re.findall(r'data-leg-state="(\w+)"', between(html, 'id="run-legs"', "</section>")) == ["interrupted"]
    assert "worker w stopped before it checkpointed a step" in html and "not resumed: the run is failed" in html


def test_runs_export_holds_both_interruptions_with_their_gaps(twice_killed):
    legs = json.loads(runs_cli("export", "crash-twice"))["legs"]
    assert [leg["state"] for leg in legs] == ["interrupted", "interrupted", "finished"]
    told = [leg["interruption"] for leg in legs[:2]]
    assert [(item["last_step"], item["next_leg"]) for item in told] == [(0, 2), (1, 3)]
    assert all(item["gap_seconds"] >= 0 and item["detected_at"] >= item["last_seen_at"] for item in told)
    assert legs[2]["interruption"] is None
