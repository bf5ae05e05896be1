"""The resumable wire end to end: journal, SSE endpoint, followers, continuation of a dead run."""

from __future__ import annotations

import signal

import pytest
from asgiref.sync import async_to_sync

from approvals.models import ApprovalRequest
from runs.errors import StaleOwnerError
from runs.models import JournalEntry, Leg, Run
from runs.stores.streams import DatabaseStreamStateStore
from tests.factories import make_paid_run, make_queued_run, make_run, make_user
from tests.processes import wait_until
from tests.streams import afollow, follow, seqs, texts

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def finished(drain_runs, owner):
    """A reimbursement run through its approval to completion: two legs in one journal."""
    return make_paid_run(drain_runs, "done-1", user=owner)


def test_every_leg_appends_to_one_gapless_journal(finished):
    parts = list(JournalEntry.objects.filter(run=finished, is_sentinel=False).order_by("seq").values_list("seq", flat=True))
    assert parts == list(range(len(parts))) and JournalEntry.objects.filter(run=finished, is_sentinel=True).count() == 2


def test_only_the_first_leg_writes_a_start_part(finished):
    types = [entry.decoded_part["type"] for entry in JournalEntry.objects.filter(run=finished, is_sentinel=False)]
    assert types.count("start") == 1 and types[0] == "start"


def test_replay_from_every_cursor_of_a_finished_run(finished, owner):
    last = JournalEntry.objects.filter(run=finished, is_sentinel=False).count() - 1

    async def every_cursor():
        return {cursor: await afollow(owner, "done-1", cursor=cursor) for cursor in range(-1, last + 1)}

    for cursor, events in async_to_sync(every_cursor)().items():
        assert seqs(events) == list(range(cursor + 1, last + 1)) and events[-1]["data"] == "[DONE]", cursor


def test_last_event_id_is_a_cursor(finished, owner):
    assert seqs(follow(owner, "done-1", last_event_id=10))[0] == 11


def test_replay_passes_the_suspension_sentinel_without_done(finished, owner):
    events = follow(owner, "done-1")
    assert [e["data"] for e in events].count("[DONE]") == 1 and events[-1]["data"] == "[DONE]"


def test_a_suspended_run_ends_its_turn_with_the_signed_approval_request(drain_runs, owner):
    make_queued_run("wait-1", user=owner)
    drain_runs()
    events = follow(make_user("rita", "reviewers"), "wait-1")
    request = next(e["data"]["approval"] for e in events if e["id"] is not None and e["data"]["type"] == "tool-approval-request")
    assert request["token"] == ApprovalRequest.objects.get(run__run_id="wait-1").token and events[-1]["data"] == "[DONE]"


def test_an_unknown_run_is_a_404_before_any_stream(client, owner):
    client.force_login(owner)
    response = client.get("/api/runs/nobody/events/")
    assert (response.status_code, response.json()) == (404, {"detail": "No run 'nobody'."})


# A NUL anywhere in a path or query is refused at the edge (400, tests/test_hostile_input.py).
@pytest.mark.parametrize("run_id", ["x" * 201, "%F0%9F%92%A5", "a%20b"])
def test_a_run_id_no_run_can_have_is_a_404(client, owner, run_id):
    client.force_login(owner)
    response = client.get(f"/api/runs/{run_id}/events/")
    assert response.status_code == 404 and response.json()["detail"].startswith("No run ")


def test_the_stream_needs_a_user(client):
    response = client.get("/api/runs/x/events/")
    assert (response.status_code, response["WWW-Authenticate"]) == (401, "Token")


@pytest.mark.parametrize("cursor", ["abc", "-2", "1.5", "%201", "1e3", "9" * 19, "%D9%A3"])
def test_a_cursor_that_is_no_seq_is_a_400(client, owner, cursor):
    client.force_login(owner)
    make_run("x", status=Run.Status.QUEUED, created_by=owner)
    response = client.get(f"/api/runs/x/events/?cursor={cursor}")
    assert (response.status_code, response.json()) == (400, {"detail": "The cursor must be a whole number of at least -1."})


def test_the_stream_is_never_kept_by_a_cache(client, owner):
    client.force_login(owner)
    make_run("x", status=Run.Status.QUEUED, created_by=owner)
    response = client.get("/api/runs/x/events/")
    response.close()  # unread: gives the stream back
    assert response["Cache-Control"] == "private, no-store"


@pytest.mark.parametrize("method", ["post", "put", "delete", "head", "options"])
def test_the_stream_answers_only_get(client, owner, method):
    client.force_login(owner)
    response = getattr(client, method)("/api/runs/x/events/")
    assert (response.status_code, response["Allow"]) == (405, "GET")


def test_a_last_event_id_with_a_nul_is_a_400(client, owner):
    client.force_login(owner)
    assert client.get("/api/runs/x/events/", headers={"Last-Event-ID": "3\x00"}).status_code == 400


def test_a_failed_leg_still_ends_with_a_sentinel_and_an_error_part(settings, drain_runs, owner):
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "broken": "tests.runs.wire.agents.broken_agent"}
    make_queued_run("broken-1", agent="broken", user=owner)
    drain_runs()
    last = JournalEntry.objects.filter(run__run_id="broken-1").order_by("-id").first()
    events = follow(owner, "broken-1")
    error = next(e["data"] for e in events if e["id"] is not None and e["data"]["type"] == "error")
    assert last.is_sentinel and Run.objects.get(run_id="broken-1").status == "failed"
    assert error["error"]["name"] == "ConnectionError" and events[-1]["data"] == "[DONE]"


def test_a_stale_owner_cannot_append_to_the_journal():
    make_run("fenced", owner_epoch=2)
    with pytest.raises(StaleOwnerError):
        DatabaseStreamStateStore().fenced("fenced", 1).append_sync("fenced", [{"type": "text-delta", "text": "x"}])
    assert JournalEntry.objects.count() == 0


def test_a_follower_tails_a_live_run_to_the_end_of_its_turn(workers, owner):
    make_queued_run("live-1", user=owner)
    workers("live", DEUZ_DEMO_DELAY_MS="40")
    wait_until(lambda: JournalEntry.objects.filter(run__run_id="live-1").exists(), what="the first part")
    events = follow(owner, "live-1")
    journal = list(JournalEntry.objects.filter(run__run_id="live-1", is_sentinel=False).order_by("seq").values_list("seq", flat=True))
    assert seqs(events) == journal == list(range(len(journal))) and events[-1]["data"] == "[DONE]"
    assert Run.objects.get(run_id="live-1").status == "suspended"


def _killed_mid_stream(workers, run_id, owner):
    make_queued_run(run_id, user=owner)
    doomed = workers("doomed", DEUZ_FAULT="mid-stream:12", DEUZ_DEMO_DELAY_MS="10")
    assert doomed.wait_exit() == -signal.SIGKILL


def test_a_producer_killed_mid_stream_is_continued_for_its_follower(workers, owner):
    _killed_mid_stream(workers, "killed-1", owner)
    events = follow(owner, "killed-1")
    kinds = [e["data"]["type"] for e in events if e["id"] is not None]
    assert seqs(events) == list(range(len(seqs(events)))) and events[-1]["data"] == "[DONE]"
    assert kinds.count("recovery") == 1 and kinds.count("start") == 1
    assert Run.objects.get(run_id="killed-1").status == "suspended"


def test_two_followers_of_a_dead_run_start_exactly_one_continuation(workers, owner):
    _killed_mid_stream(workers, "killed-2", owner)

    async def both():
        import asyncio

        return await asyncio.gather(afollow(owner, "killed-2"), afollow(owner, "killed-2"))

    first, second = async_to_sync(both)()
    assert Leg.objects.filter(run__run_id="killed-2", kind="recovery").count() == 1
    assert first == second and [e["data"]["type"] for e in first if e["id"] is not None].count("recovery") == 1


def test_a_lost_notification_does_not_lose_a_part(settings, workers, owner):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "tests.runs.wire.layers.DeafChannelLayer"}}
    make_queued_run("deaf-1", user=owner)
    workers("live", DEUZ_DEMO_DELAY_MS="20")
    events = follow(owner, "deaf-1")
    journal_text = "".join(
        part["text"] for part in (
            e.decoded_part for e in JournalEntry.objects.filter(run__run_id="deaf-1", is_sentinel=False).order_by("seq"))
        if part["type"] == "text-delta")
    assert texts(events) == journal_text and events[-1]["data"] == "[DONE]"


def test_a_producer_killed_before_its_first_checkpoint_is_continued_with_a_recovery_part(workers, owner):
    make_queued_run("killed-0", user=owner)
    doomed = workers("doomed", DEUZ_FAULT="mid-stream:3", DEUZ_DEMO_DELAY_MS="10")
    assert doomed.wait_exit() == -signal.SIGKILL
    events = follow(owner, "killed-0")
    recovery = next(e["data"] for e in events if e["id"] is not None and e["data"]["type"] == "recovery")
    assert recovery["restarted_step_index"] == 0 and events[-1]["data"] == "[DONE]"
    assert seqs(events) == list(range(len(seqs(events))))
