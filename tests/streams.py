"""Reading the resumable stream in tests: SSE through Django's AsyncClient or the project's ASGI application,
WebSocket frames through Channels' communicator (the people who follow are made by tests.factories)."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from channels.testing import ApplicationCommunicator, WebsocketCommunicator
from django.test import AsyncClient

from tests.factories import token_of

ORIGIN = (b"origin", b"http://localhost")


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Events as dicts with ``id`` (int or None) and ``data`` (the decoded part, or "[DONE]"); the ``retry:`` hint
    is not an event."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith((":", "retry:"))]
        if not lines:
            continue
        fields: dict[str, list[str]] = {}
        for line in lines:
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
        data = "\n".join(fields.get("data", []))
        events.append({
            "id": int(fields["id"][0]) if "id" in fields else None,
            "data": data if data == "[DONE]" else json.loads(data),
        })
    return events


async def afollow(user, run_id: str, *, cursor: int | None = None, last_event_id: int | None = None) -> list[dict]:
    client = AsyncClient()
    await client.aforce_login(user)
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    url = f"/api/runs/{run_id}/events/" + (f"?cursor={cursor}" if cursor is not None else "")
    response = await client.get(url, headers=headers)
    assert response.status_code == 200, response.status_code
    chunks = [chunk async for chunk in response.streaming_content]
    return parse_sse(b"".join(chunks).decode())


def follow(user, run_id: str, **options) -> list[dict]:
    return async_to_sync(afollow)(user, run_id, **options)


def seqs(events: list[dict]) -> list[int]:
    return [event["id"] for event in events if event["id"] is not None]


def texts(events: list[dict]) -> str:
    return "".join(e["data"]["text"] for e in events if isinstance(e["data"], dict) and e["data"]["type"] == "text-delta")


class SseStream:
    """One ``GET`` through the project's ASGI application (as daphne calls it), open until ``close``."""

    def __init__(self, path: str, *, headers: list[tuple[bytes, bytes]] = ()) -> None:
        from deuz_project.asgi import application

        path, _, query = path.partition("?")
        self.communicator = ApplicationCommunicator(application, {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
            "headers": [(b"host", b"testserver"), *headers], "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        })
        self.status: int | None = None
        self.body = b""

    async def open(self) -> int:
        """Send the request and wait for the answer's status."""
        await self.communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await self.communicator.receive_output(timeout=20)
        assert start["type"] == "http.response.start", start
        self.status = start["status"]
        return self.status

    async def read_until(self, text: str) -> str:
        """The body so far, once it contains ``text``."""
        while text.encode() not in self.body:
            message = await self.communicator.receive_output(timeout=20)
            self.body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        return self.body.decode()

    async def close(self) -> None:
        """The client goes away; waits until the application has finished the request."""
        await self.communicator.send_input({"type": "http.disconnect"})
        await self.communicator.wait(timeout=20)


def token_header(user) -> tuple[bytes, bytes]:
    return (b"authorization", f"Token {token_of(user)}".encode())


async def ws_frames(path: str, *, headers: list[tuple[bytes, bytes]] = (), limit: int = 500) -> tuple[list[dict], int]:
    """The frames of one WebSocket until the server closes it, and its close code."""
    from deuz_project.asgi import application

    communicator = WebsocketCommunicator(application, path, headers=[ORIGIN, *headers])
    connected, code = await communicator.connect(timeout=10)
    received: list[dict] = []
    if connected:
        while len(received) < limit:
            message = await communicator.receive_output(timeout=10)
            if message["type"] == "websocket.close":
                code = message.get("code", 1000)
                break
            received.append(json.loads(message["text"]))
    await communicator.disconnect()
    return received, code


def ws_follow(path: str, **options) -> tuple[list[dict], int]:
    return async_to_sync(ws_frames)(path, **options)
