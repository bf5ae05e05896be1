"""The channel layer of a single process without Redis: Channels' in-memory layer, safe across event loops.

`manage.py serve` runs its embedded workers on threads of their own, each with its own event loop, beside
daphne's. Channels' InMemoryChannelLayer wakes a waiting receiver from the sender's thread, which does not
wake the receiver's loop: a journal notification from an embedded worker reached a follower only at its next
poll (up to seconds). This layer hands a message for a receiver waiting on another loop to that loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from channels.layers import InMemoryChannelLayer

__all__ = ["LoopSafeInMemoryChannelLayer"]


class LoopSafeInMemoryChannelLayer(InMemoryChannelLayer):
    """InMemoryChannelLayer whose sends reach a receiver on another thread's event loop at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._receiving_loops: dict[str, asyncio.AbstractEventLoop] = {}

    async def receive(self, channel: str) -> dict[str, Any]:
        self._receiving_loops[channel] = asyncio.get_running_loop()
        try:
            return await super().receive(channel)
        finally:
            if channel not in self.channels:  # nothing queued any more: forget the channel's loop too
                self._receiving_loops.pop(channel, None)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        loop = self._receiving_loops.get(channel)
        if loop is None or loop is asyncio.get_running_loop() or loop.is_closed():
            await super().send(channel, message)
            return
        # On the receiver's loop, so putting the message wakes its waiting get(); ChannelFull comes back here.
        handed = asyncio.run_coroutine_threadsafe(InMemoryChannelLayer.send(self, channel, message), loop)
        await asyncio.wrap_future(handed)

    async def flush(self) -> None:
        await super().flush()
        self._receiving_loops.clear()
