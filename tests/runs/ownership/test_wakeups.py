"""Waking within one process: embedded workers hear their own process's commits, and the in-memory channel
layer reaches a receiver on another thread's event loop (manage.py serve's embedded workers)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from runs.wire.channel_layers import LoopSafeInMemoryChannelLayer
from runs.ownership.wakeups import runs_notify, runs_wake_register


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
