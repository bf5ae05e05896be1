"""The live pages' WebSocket (`ws/live/`): who may follow which topic, and the frames each change sends
(the in-memory layer by default, Redis when REDIS_URL is set)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from approvals.models import ApprovalRequest
from approvals.services import approval_decide, approval_requests_withdraw
from runs.api.pages_socket import LivePagesConsumer
from runs.models import Run
from runs.services.lifecycle import run_cancel
from tests.factories import make_queued_run

pytestmark = pytest.mark.django_db(transaction=True)


def as_user(user):
    """The consumer with ``user`` in its scope, as the session middleware would put it there."""
    app = LivePagesConsumer.as_asgi()

    async def with_user(scope, receive, send):
        return await app({**scope, "user": user}, receive, send)

    return with_user


async def connect(user, query: str):
    from django.contrib.auth.models import AnonymousUser

    communicator = WebsocketCommunicator(as_user(user or AnonymousUser()), f"/ws/live/?{query}")
    connected, code = await communicator.connect()
    return communicator, connected, code


def refusal(user, query: str):
    """The close code of a socket the consumer accepted and then refused (a browser sees the code only then)."""
    async def run():
        communicator, connected, code = await connect(user, query)
        assert connected, code
        closed = await communicator.receive_output(timeout=5)
        await communicator.disconnect()
        return closed["type"], closed.get("code")

    return async_to_sync(run)()


def frames_after(user, query: str, change, *, initial: int = 0, expect: int = 1) -> list[dict]:
    """Connect, skip ``initial`` frames, make ``change`` (sync, in a thread), and collect ``expect`` frames."""

    async def run():
        communicator, connected, code = await connect(user, query)
        assert connected, code
        for _ in range(initial):
            await communicator.receive_json_from(timeout=5)
        await database_sync_to_async(change)()
        received = [await communicator.receive_json_from(timeout=5) for _ in range(expect)]
        assert await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect()
        return received

    return async_to_sync(run)()


def test_a_visitor_without_a_session_is_refused():
    assert refusal(None, "topic=runs") == ("websocket.close", 4401)


def test_the_console_topic_needs_the_permission_to_decide(users):
    assert refusal(users["support"], "topic=approvals") == ("websocket.close", 4403)


def test_a_run_the_user_may_not_read_is_refused_as_not_found(users, suspended):
    assert refusal(users["plain"], "topic=run:r1") == ("websocket.close", 4404)
    assert refusal(users["plain"], "topic=run:no-such-run") == ("websocket.close", 4404)


@pytest.mark.parametrize("query", ["", "topic=everything", "topic=run:", "topic=runs&topic=runs&topic=runs&topic=runs&topic=runs"])
def test_an_unknown_or_missing_topic_is_refused(users, query):
    assert refusal(users["reviewer"], query) == ("websocket.close", 4400)


def test_a_run_topic_starts_with_the_runs_status(users, suspended):
    async def run():
        communicator, _, _ = await connect(users["owner"], "topic=run:r1")
        frame = await communicator.receive_json_from(timeout=5)
        await communicator.disconnect()
        return frame

    assert async_to_sync(run)() == {"topic": "run:r1", "event": "status", "run_id": "r1", "status": "suspended"}


def test_a_verdict_tells_the_console(users, suspended):
    def decide():
        approval_decide(run_id="r1", approval_id=suspended.approval_id, approved=True, token=suspended.token,
                        user=users["reviewer"])

    assert frames_after(users["reviewer"], "topic=approvals", decide) == [
        {"topic": "approvals", "event": "approvals", "run_id": "r1", "status": "queued"}
    ]


def test_a_new_request_tells_the_console(users, start, drain_runs):
    start("r2")
    frames = frames_after(users["reviewer"], "topic=approvals", drain_runs)
    # Recorded inside the leg's checkpoint, while the run still runs; it is suspended once the leg closes.
    assert frames == [{"topic": "approvals", "event": "approvals", "run_id": "r2", "status": "running"}]


def test_a_cancel_tells_the_runs_page_and_the_list(users, suspended):
    frames = frames_after(users["owner"], "topic=run:r1&topic=runs", lambda: run_cancel(run_id="r1", user=users["owner"]),
                          initial=1, expect=3)
    assert {"topic": "run:r1", "event": "status", "run_id": "r1", "status": "cancelled"} in frames
    assert {"topic": "run:r1", "event": "approvals", "run_id": "r1", "status": "cancelled"} in frames  # withdrawn


def test_the_run_list_hears_of_its_users_own_runs(users, start):
    frames = frames_after(users["owner"], "topic=runs", lambda: start("r3"))
    assert frames == [{"topic": "runs", "event": "status", "run_id": "r3", "status": "queued"}]


def test_the_run_list_does_not_hear_of_another_users_runs(users, start):
    async def run():
        communicator, _, _ = await connect(users["plain"], "topic=runs")
        await database_sync_to_async(start)("r4")
        quiet = await communicator.receive_nothing(timeout=0.5)
        await communicator.disconnect()
        return quiet

    assert async_to_sync(run)() is True


def test_support_hears_of_every_run(users, start):
    frames = frames_after(users["support"], "topic=runs", lambda: start("r5"))
    assert [frame["run_id"] for frame in frames] == ["r5"]


def test_a_change_rolled_back_sends_nothing(users, suspended):
    from django.db import transaction

    def cancel_then_roll_back():
        with transaction.atomic():
            approval_requests_withdraw(run=Run.objects.get(run_id="r1"), user=None)
            transaction.set_rollback(True)

    async def run():
        communicator, _, _ = await connect(users["reviewer"], "topic=approvals")
        await database_sync_to_async(cancel_then_roll_back)()
        quiet = await communicator.receive_nothing(timeout=0.5)
        await communicator.disconnect()
        return quiet

    assert async_to_sync(run)() is True
    assert ApprovalRequest.objects.get(pk=suspended.pk).status == "pending"


def test_frames_carry_no_tool_input_or_token(users, suspended):
    def decide():
        approval_decide(run_id="r1", approval_id=suspended.approval_id, approved=False, token=suspended.token,
                        reason="not this one", user=users["reviewer"])

    (frame,) = frames_after(users["reviewer"], "topic=approvals", decide)
    assert set(frame) == {"topic", "event", "run_id", "status"}


def test_run_start_still_works_when_the_layer_is_broken(settings, users):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "runs.wire.channel_layers.RedisPubSubChannelLayer",
                                           "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}}
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    try:
        run = make_queued_run("r6", user=users["owner"])
    finally:
        channel_layers.backends.clear()
    assert Run.objects.get(pk=run.pk).status == "queued"
