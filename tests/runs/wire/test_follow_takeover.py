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

from runs.execution.worker import worker_id_default
from runs.models import JournalEntry, Leg, Run
from runs.ownership.liveness import liveness_owners_dead
from tests.factories import make_queued_run
from tests.processes import wait_until
from tests.streams import parse_sse, seqs

pytestmark = pytest.mark.django_db(transaction=True)


def _last_seq(run_id: str) -> int:
    return max(JournalEntry.objects.filter(run__run_id=run_id, is_sentinel=False).values_list("seq", flat=True))


async def _follow_through_a_kill(user, run_id: str, doomed) -> dict:
    """Follow ``run_id`` over SSE, SIGKILL ``doomed`` once the follower has parts, and read to [DONE]: the seconds
    from the kill to the first part after the dead leg's last, whether this process held its follower's liveness
    token then (its continuation's leg under way), every event, and that last seq."""
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get(f"/api/runs/{run_id}/events/")
    assert response.status_code == 200
    stream = aiter(response.streaming_content)
    text = b""
    while len(seqs(parse_sse(text.decode()))) < 3:
        text += await anext(stream)
    await asyncio.sleep(0.5)  # the follower has read what there is and waits on its run's tail
    doomed.signal(signal.SIGKILL)
    killed = time.monotonic()
    await asyncio.to_thread(doomed.wait_exit)
    last = await sync_to_async(_last_seq)(run_id)
    while not any(seq > last for seq in seqs(parse_sse(text.decode()))):
        text += await asyncio.wait_for(anext(stream), 60)
    seconds = time.monotonic() - killed
    follower_id = f"{worker_id_default()}:sse"
    held = not await sync_to_async(liveness_owners_dead)({follower_id})
    async for chunk in stream:
        text += chunk
    return {"seconds": seconds, "held": held, "events": parse_sse(text.decode()), "last": last}


def test_a_follower_sees_the_continuation_within_a_second_of_its_owner_s_death(workers, owner, drain_runs, settings):
    # This process has run a leg before (its first leg's imports and first queries are the fresh-resume figure's
    # business, not the takeover's), and streams its continuation slowly enough to be seen under way.
    make_queued_run("warm-up", user=owner)
    drain_runs()
    settings.DEUZ_DEMO_DELAY_MS = 50
    make_queued_run("orphan-1", user=owner)
    doomed = workers("doomed", DEUZ_LEASE_SECONDS="60", DEUZ_DEMO_DELAY_MS="150")
    wait_until(lambda: JournalEntry.objects.filter(run__run_id="orphan-1").count() >= 3, what="the first parts")
    seen = async_to_sync(_follow_through_a_kill)(owner, "orphan-1", doomed)
    # Its lease (60 s) and the follower's poll (every 5 s with live push) are far off: the watch woke it.
    assert seen["seconds"] < 1.0, seen["seconds"]
    events, last = seen["events"], seen["last"]
    assert seqs(events) == list(range(len(seqs(events)))) and events[-1]["data"] == "[DONE]"
    assert next(e["data"]["type"] for e in events if e["id"] == last + 1) == "recovery"
    legs = list(Leg.objects.filter(run__run_id="orphan-1").values_list("kind", "worker_id"))
    assert legs == [("start", "doomed"), ("recovery", f"{worker_id_default()}:sse")]
    assert seen["held"]  # the process continuing the run holds the token of the id it claimed under
    assert Run.objects.get(run_id="orphan-1").status == "suspended"
