"""A cancel reaches a leg running in a real worker process (by NOTIFY on PostgreSQL, by the leg's poll on SQLite):
the leg stops mid-step, asks the model nothing more, and its stream says who cancelled, why, and ends."""

from __future__ import annotations

import pytest

from runs.models import JournalEntry, Leg, Run
from tests.factories import make_queued_run
from tests.processes import wait_until
from tests.streams import follow

pytestmark = pytest.mark.django_db(transaction=True)


def journal(run_id: str) -> list[dict]:
    rows = JournalEntry.objects.filter(run__run_id=run_id, is_sentinel=False).order_by("seq")
    return [row.decoded_part for row in rows]


def test_a_cancel_through_the_api_stops_a_running_leg_with_no_further_model_call(workers, token_client, owner):
    make_queued_run("c-1", agent="coder", user=owner)
    workers("slow", DEUZ_DEMO_DELAY_MS="300")  # the first step's text streams for about two seconds
    wait_until(lambda: any(part["type"] == "text-delta" for part in journal("c-1")), what="the first delta")
    answer = token_client(owner).post("/api/runs/c-1/cancel/", {"reason": "Wrong repository."}, format="json")
    assert (answer.status_code, answer.json()["status"]) == (200, "running")  # the leg is stopping
    wait_until(lambda: Run.objects.get(run_id="c-1").status == "cancelled", what="the leg to stop")
    parts = journal("c-1")
    types = [part["type"] for part in parts]
    # One model call, cut between two deltas: no tool call, no step closed, no second step (the sub-agent's).
    assert (types.count("step-start"), "tool-call" in types, "step-finish" in types) == (1, False, False)
    assert parts[-2] == {"type": "cancelled", "by": "olga", "reason": "Wrong repository."}
    assert (parts[-1]["type"], parts[-1]["finish_reason"]) == ("finish", "cancelled")
    assert list(Leg.objects.filter(run__run_id="c-1").values_list("finish_reason", flat=True)) == ["cancelled"]


def test_a_follower_of_a_leg_cancelled_in_a_worker_gets_its_done(workers, token_client, owner):
    make_queued_run("c-2", agent="coder", user=owner)
    workers("slow", DEUZ_DEMO_DELAY_MS="300")
    wait_until(lambda: any(part["type"] == "text-delta" for part in journal("c-2")), what="the first delta")
    token_client(owner).post("/api/runs/c-2/cancel/")
    events = follow(owner, "c-2")
    parts = [event["data"] for event in events if event["id"] is not None]
    assert [part["type"] for part in parts[-2:]] == ["cancelled", "finish"] and events[-1]["data"] == "[DONE]"
