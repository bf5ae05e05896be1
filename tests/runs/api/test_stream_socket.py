"""The WebSocket consumer, through Channels' communicator and the project's ASGI application
(the in-memory layer by default, Redis when REDIS_URL is set)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from approvals.models import ApprovalRequest
from deuz_project.asgi import application
from runs.models import JournalEntry
from runs.wire.groups import run_stream_group
from tests.factories import make_suspended_run, verdict
from tests.streams import ORIGIN, token_header, ws_follow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def auth(owner):
    """The owner's `Authorization: Token KEY` header."""
    return token_header(owner)


@pytest.fixture
def suspended(drain_runs, owner):
    """The last seq of the owner's run ws-1, which waits for its payment's approval."""
    make_suspended_run(drain_runs, "ws-1", user=owner)
    return JournalEntry.objects.filter(run__run_id="ws-1", is_sentinel=False).count() - 1


def test_frames_replay_the_journal_from_the_cursor(suspended, auth):
    received, code = ws_follow("/ws/runs/ws-1/?cursor=5", headers=[auth])
    assert [f["seq"] for f in received[:-1]] == list(range(6, suspended + 1)) and received[-1] == {"done": True}
    assert code == 1000


def test_frames_carry_the_parts(suspended, auth):
    received, _ = ws_follow("/ws/runs/ws-1/", headers=[auth])
    assert received[0] == {"seq": 0, "part": {"type": "start", "run_id": "ws-1"}}


def test_a_websocket_without_a_user_is_closed_with_4401_after_its_handshake(suspended):
    # Accepted first: a browser sees a handshake refused before acceptance as 1006, a drop worth retrying.
    assert ws_follow("/ws/runs/ws-1/") == ([], 4401)


def test_a_token_that_does_not_verify_is_closed_with_4401(suspended):
    assert ws_follow("/ws/runs/ws-1/", headers=[(b"authorization", b"Token not-a-key")]) == ([], 4401)


def test_the_session_cookie_opens_the_socket(suspended, owner, client):
    client.force_login(owner)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    received, code = ws_follow("/ws/runs/ws-1/", headers=[cookie])
    assert received[0]["seq"] == 0 and received[-1] == {"done": True} and code == 1000


def test_an_unknown_run_is_closed_with_4404(auth):
    assert ws_follow("/ws/runs/nobody/", headers=[auth]) == ([], 4404)


@pytest.mark.parametrize("run_id", ["%00", "a%00b", "x" * 201, "a%20b"])
def test_a_run_id_no_run_can_have_is_closed_with_4404(auth, run_id):
    assert ws_follow(f"/ws/runs/{run_id}/", headers=[auth]) == ([], 4404)


@pytest.mark.parametrize("cursor", ["abc", "-2", "%00", "9" * 19])
def test_a_cursor_that_is_no_seq_is_closed_with_4400(suspended, auth, cursor):
    assert ws_follow(f"/ws/runs/ws-1/?cursor={cursor}", headers=[auth]) == ([], 4400)


@pytest.mark.parametrize("path", ["/ws/nope/", "/ws/runs/a/b/", "/ws/runs/", "/", "/ws/runs/a/b/c/%00/"])
def test_an_unknown_websocket_path_is_closed_with_4404(path, caplog):
    assert ws_follow(path) == ([], 4404)
    assert not [record for record in caplog.records if record.levelname in ("ERROR", "CRITICAL")]


def test_the_consumer_tails_a_verdict_leg_past_the_suspension(suspended, auth, drain_runs):
    """Connect while the run is queued for its verdict leg; the leg's parts arrive, woken via the layer."""
    verdict(ApprovalRequest.objects.get(run__run_id="ws-1"))

    async def follow_while_the_leg_runs():
        import asyncio

        from asgiref.sync import sync_to_async

        communicator = WebsocketCommunicator(application, f"/ws/runs/ws-1/?cursor={suspended}",
                                             headers=[ORIGIN, auth])
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
    assert kinds[:2] == ["tool-approval-verdict", "tool-result"] and kinds[-1] == "finish" and received[-1] == {"done": True}
    assert [f["seq"] for f in received[:-1]] == list(range(suspended + 1, suspended + 1 + len(kinds)))


def test_the_channel_layer_delivers_group_messages():
    async def roundtrip():
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(run_stream_group("x"), channel)
        await layer.group_send(run_stream_group("x"), {"type": "journal.appended", "seq": 3})
        return await layer.receive(channel)

    assert async_to_sync(roundtrip)()["seq"] == 3
