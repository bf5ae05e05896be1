"""The SSE stream writes what it knows at once in one write: a replayed page of the journal with the end of the
turn (a reconnecting client's catch-up is one body message, not one per part), as a leg's last parts are."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from tests.factories import make_suspended_run
from tests.streams import parse_sse

pytestmark = pytest.mark.django_db(transaction=True)


async def _body_messages(user, run_id: str) -> list[bytes]:
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get(f"/api/runs/{run_id}/events/")
    assert response.status_code == 200
    return [chunk async for chunk in response.streaming_content]


def test_a_replay_of_a_turn_that_ended_is_one_write_after_the_opening(drain_runs, owner):
    make_suspended_run(drain_runs, "writes-1", user=owner)
    opening, *rest = async_to_sync(_body_messages)(owner, "writes-1")
    events = parse_sse(rest[0].decode()) if rest else []
    assert opening.startswith(b"retry: ") and len(rest) == 1
    assert len(events) > 2 and events[-1]["data"] == "[DONE]"
    assert [event["id"] for event in events[:-1]] == list(range(len(events) - 1))

