"""The WebSocket consumer, through Channels' communicator and the project's ASGI application
(the in-memory layer by default, Redis when REDIS_URL is set)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from deuz_project.asgi import application
from runs.journal import run_group_name
from runs.models import JournalEntry
from runs.services import run_start

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://localhost")


@pytest.fixture
def token():
    user = get_user_model().objects.create_user("ws-user", password="x")
    return Token.objects.create(user=user).key


@pytest.fixture
def suspended(drain_runs):
    run_start(agent="reimbursement", messages=[{"role": "user", "content": "Reimburse exp-1042"}], run_id="ws-1")
    drain_runs()
    return JournalEntry.objects.filter(run__run_id="ws-1", is_sentinel=False).count() - 1


async def frames(token, path, limit=500):
    communicator = WebsocketCommunicator(application, path, headers=[ORIGIN, (b"authorization", f"Token {token}".encode())])
    connected, _ = await communicator.connect()
    received = []
    if connected:
        while len(received) < limit:
            frame = await communicator.receive_json_from(timeout=10)
            received.append(frame)
            if frame.get("done"):
                break
    await communicator.disconnect()
    return connected, received


def test_frames_replay_the_journal_from_the_cursor(suspended, token):
    connected, received = async_to_sync(frames)(token, "/ws/runs/ws-1/?cursor=5")
    assert connected and [f["seq"] for f in received[:-1]] == list(range(6, suspended + 1)) and received[-1] == {"done": True}


def test_frames_carry_the_parts(suspended, token):
    _, received = async_to_sync(frames)(token, "/ws/runs/ws-1/")
    assert received[0] == {"seq": 0, "part": {"type": "start", "run_id": "ws-1"}}


def test_a_websocket_without_a_user_is_refused(suspended):
    async def anonymous():
        communicator = WebsocketCommunicator(application, "/ws/runs/ws-1/", headers=[ORIGIN])
        connected, code = await communicator.connect()
        await communicator.disconnect()
        return connected, code

    assert async_to_sync(anonymous)() == (False, 4401)


def test_an_unknown_run_is_an_error_frame(token):
    _, received = async_to_sync(frames)(token, "/ws/runs/nobody/")
    assert received[0]["part"]["error"]["name"] == "RunNotFound" and received[-1] == {"done": True}


def test_the_consumer_tails_a_verdict_leg_past_the_suspension(suspended, token, drain_runs):
    """Connect while the run is queued for its verdict leg; the leg's parts arrive, woken via the layer."""
    request = ApprovalRequest.objects.get(run__run_id="ws-1")
    approval_decide(run_id="ws-1", approval_id=request.approval_id, approved=True, token=request.token, user=None)

    async def follow_while_the_leg_runs():
        import asyncio

        from asgiref.sync import sync_to_async

        communicator = WebsocketCommunicator(application, f"/ws/runs/ws-1/?cursor={suspended}",
                                             headers=[ORIGIN, (b"authorization", f"Token {token}".encode())])
        await communicator.connect()
        def drain_on_its_own_thread():
            from django.db import connections

            try:
                return drain_runs()
            finally:
                connections.close_all()

        leg = asyncio.create_task(sync_to_async(drain_on_its_own_thread, thread_sensitive=False)())
        received = []
        while True:
            frame = await communicator.receive_json_from(timeout=20)
            received.append(frame)
            if frame.get("done"):
                break
        await leg
        await communicator.disconnect()
        return received

    received = async_to_sync(follow_while_the_leg_runs)()
    kinds = [frame["part"]["type"] for frame in received[:-1]]
    assert kinds[0] == "tool-result" and kinds[-1] == "finish" and received[-1] == {"done": True}
    assert [f["seq"] for f in received[:-1]] == list(range(suspended + 1, suspended + 1 + len(kinds)))


def test_the_channel_layer_delivers_group_messages():
    async def roundtrip():
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(run_group_name("x"), channel)
        await layer.group_send(run_group_name("x"), {"type": "journal.appended", "seq": 3})
        return await layer.receive(channel)

    assert async_to_sync(roundtrip)()["seq"] == 3
