"""Followers against a real `manage.py serve` (daphne): what a browser or an API client sees on the wire, and
what 60 open streams cost the server's database (issue 12)."""

from __future__ import annotations

import json

import os
import socket
import struct
from urllib.parse import urlparse

import pytest
import websocket

from deuz_project.database_url import database_url
from runs.models import Run
from runs.stores.streams import DatabaseStreamStateStore
from tests.browser.serving import ServeProcess
from tests.environment import PRODUCTION_ENV, clean_env
from tests.factories import make_run, make_user, token_of
from tests.processes import database_handles

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(transactional_db):
    """A `manage.py serve --workers 0` on this test's database: runs stay queued, so followers keep tailing."""
    environment = clean_env(DATABASE_URL=database_url(), **PRODUCTION_ENV)
    if os.environ.get("REDIS_URL"):
        environment["REDIS_URL"] = os.environ["REDIS_URL"]
    process = ServeProcess("--workers", "0", env=environment)
    yield process
    process.stop()


def close_code(server: ServeProcess, path: str, **options) -> int:
    """The close code a WebSocket client receives (a handshake refused with an HTTP status fails instead).

    Raw frames, so the client does not answer the server's close itself: a server that waited longer than its
    closing handshake allows (autobahn's 1 s, easily passed on a loaded machine) resets the connection, and the
    reply would then fail after the close frame, and its code, had arrived."""
    address = urlparse(server.url)
    socket_ = websocket.create_connection(f"ws://{address.netloc}{path}", origin=server.url.rstrip("/"), timeout=20,
                                          **options)
    try:
        while True:
            frame = socket_.recv_frame()
            if frame.opcode == websocket.ABNF.OPCODE_CLOSE:
                return struct.unpack("!H", frame.data[:2])[0]
    finally:
        socket_.close()


def test_a_signed_out_socket_is_closed_with_4401_not_refused_at_the_handshake(server):
    # A refused handshake is code 1006 in a browser, which the client cannot tell from a drop and retries.
    make_run("queued-1", status=Run.Status.QUEUED)
    assert close_code(server, "/ws/runs/queued-1/") == 4401


def test_a_token_opens_a_socket_on_the_handshake(server):
    user = make_user("api-client")
    make_run("queued-1", created_by=user, status=Run.Status.SUSPENDED)
    DatabaseStreamStateStore().append_sync("queued-1", [{"type": "start", "run_id": "queued-1"}], end_leg=True)
    assert close_code(server, "/ws/runs/queued-1/", header=[f"Authorization: Token {token_of(user)}"]) == 1000


@pytest.mark.parametrize("path", ["/ws/nope/", "/ws/runs/a/b/", "/ws/%00/"])
def test_an_unknown_socket_path_is_closed_with_4404_without_an_error(server, path):
    assert close_code(server, path) == 4404
    assert "Traceback" not in "".join(server.output) and " 500 " not in "".join(server.output)


def http_open(server: ServeProcess, path: str, token: str, *, accept: str = "text/event-stream") -> socket.socket:
    """An HTTP/1.1 GET, left open."""
    address = urlparse(server.url)
    client = socket.create_connection((address.hostname, address.port), timeout=30)
    client.sendall(f"GET {path} HTTP/1.1\r\nHost: {address.netloc}\r\nAuthorization: Token {token}\r\n"
                   f"Accept: {accept}\r\n\r\n".encode())
    return client


def read_until(client: socket.socket, marker: bytes, seen: bytes = b"") -> bytes:
    while marker not in seen:
        chunk = client.recv(65536)
        if not chunk:
            break
        seen += chunk
    return seen


def test_sixty_event_streams_hold_a_few_database_handles_and_the_api_answers(server):
    users = [make_user(f"tail-{n}") for n in range(3)]
    for user in users:
        make_run(f"tail-{user.username}", status=Run.Status.QUEUED, created_by=user)
    streams = [http_open(server, f"/api/runs/tail-{user.username}/events/", token_of(user)) for user in users for _ in range(20)]
    try:
        heads = [read_until(stream, b"\r\n\r\n") for stream in streams]
        assert [head.split(b" ", 2)[1] for head in heads] == [b"200"] * 60
        for user in users:
            DatabaseStreamStateStore().append_sync(f"tail-{user.username}", [{"type": "text-delta", "text": "hi"}])
        peak = 0
        for stream, head in zip(streams, heads):  # every follower reads its run's new part
            read_until(stream, b"id: 0", head)
            peak = max(peak, database_handles(server.process.pid))
        api = http_open(server, "/api/runs/", token_of(users[0]), accept="application/json")
        answer = read_until(api, b"\r\n\r\n")
        api.close()
    finally:
        for stream in streams:
            stream.close()
    assert peak <= 10, f"{peak} database handles for 60 followers"
    assert answer.startswith(b"HTTP/1.1 200 ")


def test_forty_websockets_hold_a_few_database_handles(server):
    users = [make_user(f"ws-{n}") for n in range(2)]
    for user in users:
        make_run(f"tail-{user.username}", status=Run.Status.QUEUED, created_by=user)
    address = urlparse(server.url)
    sockets = [
        websocket.create_connection(f"ws://{address.netloc}/ws/runs/tail-{user.username}/", origin=server.url.rstrip("/"),
                                    header=[f"Authorization: Token {token_of(user)}"], timeout=30)
        for user in users for _ in range(20)
    ]
    try:
        for user in users:
            DatabaseStreamStateStore().append_sync(f"tail-{user.username}", [{"type": "text-delta", "text": "hi"}])
        peak, frames = 0, []
        for socket_ in sockets:  # every follower reads its run's new part
            frames.append(socket_.recv())
            peak = max(peak, database_handles(server.process.pid))
    finally:
        for socket_ in sockets:
            socket_.close()
    assert [json.loads(frame) for frame in frames] == [{"seq": 0, "part": {"type": "text-delta", "text": "hi"}}] * 40
    assert peak <= 10, f"{peak} database handles for 40 followers"
