"""Reading the resumable stream in tests: SSE through Django's AsyncClient, parsed event by event."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from django.test import AsyncClient


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Events as dicts with ``id`` (int or None) and ``data`` (the decoded part, or "[DONE]")."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
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
