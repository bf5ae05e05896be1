"""Waking within one process: embedded workers hear their own process's commits, a running leg hears its run's
cancel, and the in-memory channel layer reaches a receiver on another thread's event loop (manage.py serve's
embedded workers); on PostgreSQL a listening worker hears another process's cancel by NOTIFY."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import connection

from runs.wire.channel_layers import LoopSafeInMemoryChannelLayer
from runs.ownership.wakeups import (
    CANCEL_CHANNEL,
    run_cancel_notify,
    run_cancel_watch,
    run_cancels_are_pushed,
    runs_listen,
    runs_notify,
    runs_wake_register,
)


@pytest.fixture
def other_loop():
    """An event loop running on a thread of its own, as an embedded worker's does."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)
    loop.close()


def _on(loop, coroutine):
    return asyncio.run_coroutine_threadsafe(coroutine, loop)


@pytest.mark.django_db  # on PostgreSQL it NOTIFYs other processes too
def test_a_registered_worker_is_woken_by_this_process_notifying(other_loop):
    async def register():
        wake = asyncio.Event()
        return wake, runs_wake_register(wake)

    wake, unregister = _on(other_loop, register()).result(timeout=10)
    waited = _on(other_loop, wake.wait())
    runs_notify()
    assert waited.result(timeout=10) is True  # a guard against a hang, not a timing
    unregister()


@pytest.mark.django_db
def test_an_unregistered_worker_is_not_woken(other_loop):
    async def register():
        wake = asyncio.Event()
        return wake, runs_wake_register(wake)

    wake, unregister = _on(other_loop, register()).result(timeout=10)
    unregister()
    runs_notify()
    assert _on(other_loop, asyncio.sleep(0, result=wake.is_set())).result(timeout=10) is False


def _watching(loop, run_id: str):
    async def register():
        heard = asyncio.Event()
        return heard, run_cancel_watch(run_id, heard)

    return _on(loop, register()).result(timeout=10)


@pytest.mark.django_db
def test_a_leg_watching_its_run_is_told_of_its_cancel_by_this_process(other_loop):
    heard, unregister = _watching(other_loop, "r1")
    waited = _on(other_loop, heard.wait())
    run_cancel_notify("r1")
    assert waited.result(timeout=10) is True  # a guard against a hang, not a timing
    unregister()


@pytest.mark.django_db
def test_a_leg_watching_another_run_is_not_told(other_loop):
    heard, unregister = _watching(other_loop, "r2")
    run_cancel_notify("r1")
    assert _on(other_loop, asyncio.sleep(0, result=heard.is_set())).result(timeout=10) is False
    unregister()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="NOTIFY is PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_a_listening_worker_passes_another_processs_cancel_to_the_leg_that_watches_it(other_loop):
    heard, unregister = _watching(other_loop, "r1")
    listening = _on(other_loop, runs_listen(asyncio.Event()))
    try:
        _on(other_loop, _until(run_cancels_are_pushed)).result(timeout=20)
        with connection.cursor() as cursor:  # what run_cancel_notify sends, here without this process's own wake-up
            cursor.execute("SELECT pg_notify(%s, %s)", [CANCEL_CHANNEL, "r1"])
        assert _on(other_loop, heard.wait()).result(timeout=10) is True
    finally:
        listening.cancel()
        unregister()


async def _until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


async def test_a_send_reaches_a_receiver_waiting_on_another_loop(other_loop):
    layer = LoopSafeInMemoryChannelLayer()
    channel = await layer.new_channel()
    received = _on(other_loop, layer.receive(channel))
    while channel not in layer._receiving_loops:  # the receiver is waiting
        await asyncio.sleep(0.01)
    await layer.send(channel, {"type": "journal.appended", "seq": 3})
    # Channels' own layer would leave the other loop asleep here, and this would hang until the guard.
    assert received.result(timeout=10) == {"type": "journal.appended", "seq": 3}


async def test_a_send_on_the_receivers_own_loop_is_delivered():
    layer = LoopSafeInMemoryChannelLayer()
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "journal.appended", "seq": 1})
    assert await layer.receive(channel) == {"type": "journal.appended", "seq": 1}
