"""The stream's doors take the API's tokens too: the SSE events view (an async view outside DRF) and the WebSocket
handshake accept `Bearer KEY` as well as `Token KEY`, and refuse a revoked or expired key."""

from __future__ import annotations

import datetime

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services import token_create, token_revoke
from tests.factories import make_suspended_run, make_user
from tests.streams import ws_follow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def owner(db):
    return make_user("olga")


@pytest.fixture
def suspended(drain_runs, owner):
    """The owner's run, waiting for the approval of its payment."""
    return make_suspended_run(drain_runs, "bearer-1", user=owner)


def sse_get(header: str):
    response = Client().get("/api/runs/bearer-1/events/", headers={"Authorization": header})
    response.close()  # gives the stream back unread
    return response


@pytest.mark.parametrize("scheme", ["Bearer", "Token"])
def test_the_event_stream_takes_the_key_in_either_scheme(suspended, owner, scheme):
    response = sse_get(f"{scheme} {token_create(user=owner, name='sse').key}")
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"


def test_the_event_stream_refuses_a_revoked_bearer_token(suspended, owner):
    issued = token_create(user=owner, name="sse")
    token_revoke(user=owner, token_id=issued.token.pk)
    response = sse_get(f"Bearer {issued.key}")
    assert (response.status_code, response.json(), response["WWW-Authenticate"]) == (
        401, {"detail": "Invalid token."}, "Token")


def test_the_event_stream_refuses_an_expired_bearer_token(suspended, owner):
    issued = token_create(user=owner, name="sse", expires_in_days=1)
    ApiToken.objects.filter(pk=issued.token.pk).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    response = sse_get(f"Bearer {issued.key}")
    assert (response.status_code, response.json()) == (401, {"detail": "Token has expired."})


@pytest.mark.parametrize("scheme", ["Bearer", "Token"])
def test_the_websocket_handshake_takes_the_key_in_either_scheme(suspended, owner, scheme):
    header = (b"authorization", f"{scheme} {token_create(user=owner, name='ws').key}".encode())
    received, code = ws_follow("/ws/runs/bearer-1/", headers=[header])
    assert received[0]["seq"] == 0 and received[-1] == {"done": True} and code == 1000


def test_the_websocket_refuses_a_revoked_bearer_token(suspended, owner):
    issued = token_create(user=owner, name="ws")
    token_revoke(user=owner, token_id=issued.token.pk)
    assert ws_follow("/ws/runs/bearer-1/", headers=[(b"authorization", f"Bearer {issued.key}".encode())]) == ([], 4401)


def test_the_websocket_refuses_an_expired_bearer_token(suspended, owner):
    issued = token_create(user=owner, name="ws", expires_in_days=1)
    ApiToken.objects.filter(pk=issued.token.pk).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    assert ws_follow("/ws/runs/bearer-1/", headers=[(b"authorization", f"Bearer {issued.key}".encode())]) == ([], 4401)
