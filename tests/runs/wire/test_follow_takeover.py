"""A follower whose run's owner dies: no worker is left, the lease is long, and the follower's own process
continues the run as soon as the owner's liveness token goes (runs.ownership.liveness's watch wakes it), not at
its lease nor at its next poll."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import AsyncClient

from runs.models import JournalEntry, Leg, Run
from tests.factories import make_queued_run
from tests.processes import wait_until
from tests.streams import parse_sse, seqs

pytestmark = pytest.mark.django_db(transaction=True)


def _last_seq(run_id: str) -> int:
    return max(JournalEntry.objects.filter(run__run_id=run_id, is_sentinel=False).values_list("seq", flat=True))


async def _follow_through_a_kill(user, run_id: str, doomed) -> tuple[float, list[dict], int]:
    """Follow ``run_id`` over SSE, SIGKILL ``doomed`` once the follower has parts, and read to [DONE]: the seconds
    from the kill to the first part after the dead leg's last, every event, and that last seq."""
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get(f"/api/runs/{run_id}/events/")
    assert response.status_code == 200
    chunks: list[tuple[float, bytes]] = []
    stream = aiter(response.streaming_content)
    while len(seqs(parse_sse(b"".join(chunk for _, chunk in chunks).decode()))) < 3:
        chunks.append((time.monotonic(), await anext(stream)))
    reading = asyncio.ensure_future(_read_rest(stream, chunks))
    await asyncio.sleep(0.5)  # the follower has read what there is and waits on its run's tail
    doomed.signal(signal.SIGKILL)
    killed = time.monotonic()
    await asyncio.to_thread(doomed.wait_exit)
    last = await sync_to_async(_last_seq)(run_id)
    await asyncio.wait_for(reading, 60)
    text = b""
    for at, chunk in chunks:
        text += chunk
        if any(seq > last for seq in seqs(parse_sse(text.decode()))):
            return at - killed, parse_sse(b"".join(chunk for _, chunk in chunks).decode()), last
    raise AssertionError("the follower never had a part of the continuation")


async def _read_rest(stream, chunks: list[tuple[float, bytes]]) -> None:
    async for chunk in stream:
        chunks.append((time.monotonic(), chunk))


def test_a_follower_sees_the_continuation_within_a_second_of_its_owner_s_death(workers, owner):
    make_queued_run("orphan-1", user=owner)
    doomed = workers("doomed", DEUZ_LEASE_SECONDS="60", DEUZ_DEMO_DELAY_MS="150")
    wait_until(lambda: JournalEntry.objects.filter(run__run_id="orphan-1").count() >= 3, what="the first parts")
    seconds, events, last = async_to_sync(_follow_through_a_kill)(owner, "orphan-1", doomed)
    # Its lease (60 s) and the follower's poll (every 5 s with live push) are far off: the watch woke it.
    assert seconds < 1.0, seconds
    assert seqs(events) == list(range(len(seqs(events)))) and events[-1]["data"] == "[DONE]"
    assert next(e["data"]["type"] for e in events if e["id"] == last + 1) == "recovery"
    legs = list(Leg.objects.filter(run__run_id="orphan-1").values_list("kind", "worker_id"))
    assert [kind for kind, _ in legs] == ["start", "recovery"] and legs[1][1].endswith(":sse")
    assert Run.objects.get(run_id="orphan-1").status == "suspended"
