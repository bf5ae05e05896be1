"""Cancelling through the API: who and why are recorded, a bad reason is a 400 that cancels nothing, and the
stream of a run cancelled with no leg running ends with its cancelled part, a cancelled finish and [DONE]."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync

from approvals.roles import SUPPORT_GROUP
from runs.access import CANCEL_EVERY_RUN
from runs.models import Run
from tests.factories import make_queued_run, make_suspended_run, make_user
from tests.streams import afollow, follow

pytestmark = pytest.mark.django_db(transaction=True)


def _parts(events: list[dict]) -> list[dict]:
    return [event["data"] for event in events if event["id"] is not None]


def test_the_owners_cancel_records_the_owner_and_the_reason(token_client, owner):
    make_queued_run("mine", user=owner)
    response = token_client(owner).post("/api/runs/mine/cancel/", {"reason": "Wrong expense."}, format="json")
    run = Run.objects.get(run_id="mine")
    assert response.status_code == 200
    assert (run.status, run.cancelled_by, run.cancel_reason) == ("cancelled", owner, "Wrong expense.")


def test_a_cancel_without_a_body_records_the_user_and_no_reason(token_client, owner):
    make_queued_run("mine", user=owner)
    assert token_client(owner).post("/api/runs/mine/cancel/").status_code == 200
    run = Run.objects.get(run_id="mine")
    assert (run.cancelled_by, run.cancel_reason) == (owner, "")


def test_staff_who_may_cancel_every_run_cancel_anothers_and_are_recorded(token_client, owner):
    # Support staff (they read every run) granted the permission to cancel every run.
    operator = make_user("opal", SUPPORT_GROUP, is_staff=True, permissions=[CANCEL_EVERY_RUN.split(".")[1]])
    make_queued_run("theirs", user=owner)
    assert token_client(operator).post("/api/runs/theirs/cancel/", {"reason": "Incident 12."},
                                       format="json").status_code == 200
    run = Run.objects.get(run_id="theirs")
    assert (run.cancelled_by, run.cancel_reason) == (operator, "Incident 12.")


@pytest.mark.parametrize("body", [{"reason": "x" * 2001}, {"reason": 5}, {"reason": None}, {"why": "typo"}, ["no"]],
                         ids=["too-long", "a-number", "null", "unknown-key", "not-an-object"])
def test_a_bad_body_is_a_400_with_field_errors_and_cancels_nothing(token_client, owner, body):
    make_queued_run("mine", user=owner)
    response = token_client(owner).post("/api/runs/mine/cancel/", body, format="json")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json()  # the errors, by field
    assert Run.objects.get(run_id="mine").status == Run.Status.QUEUED


def test_a_400_is_never_given_before_the_permission_answer(token_client, owner):
    make_queued_run("a", user=owner)
    support = make_user("sue", SUPPORT_GROUP)
    assert token_client(support).post("/api/runs/a/cancel/", {"reason": 5}, format="json").status_code == 403


def test_a_cancelled_queued_runs_stream_is_its_cancelled_part_a_cancelled_finish_and_done(token_client, owner):
    make_queued_run("q", user=owner)
    token_client(owner).post("/api/runs/q/cancel/", {"reason": "Not needed."}, format="json")
    events = follow(owner, "q")
    assert _parts(events) == [{"type": "cancelled", "by": "olga", "reason": "Not needed."},
                              {"type": "finish", "finish_reason": "cancelled", "usage": _parts(events)[1]["usage"]}]
    assert events[-1]["data"] == "[DONE]"


def test_a_cancelled_suspended_runs_stream_ends_with_the_cancel_after_its_suspension(token_client, owner,
                                                                                      drain_runs):
    make_suspended_run(drain_runs, "s", user=owner)
    token_client(owner).post("/api/runs/s/cancel/", format="json")
    events = follow(owner, "s")
    types = [part["type"] for part in _parts(events)]
    finishes = [part["finish_reason"] for part in _parts(events) if part["type"] == "finish"]
    assert types[-2:] == ["cancelled", "finish"] and finishes == ["suspended", "cancelled"]
    assert events[-1]["data"] == "[DONE]"


def test_a_follower_waiting_on_a_queued_run_gets_the_cancel_and_its_done(token_client, owner):
    make_queued_run("q", user=owner)

    async def follow_then_cancel():
        following = asyncio.ensure_future(afollow(owner, "q"))
        await asyncio.sleep(0.3)  # the follower is tailing the queued run (no assertion on time)
        from asgiref.sync import sync_to_async

        await sync_to_async(lambda: token_client(owner).post("/api/runs/q/cancel/"))()
        return await asyncio.wait_for(following, 30)

    events = async_to_sync(follow_then_cancel)()
    assert [part["type"] for part in _parts(events)] == ["cancelled", "finish"] and events[-1]["data"] == "[DONE]"
