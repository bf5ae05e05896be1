"""Channel layers for tests."""

from __future__ import annotations

import asyncio

from channels.layers import InMemoryChannelLayer


class DeafChannelLayer(InMemoryChannelLayer):
    """Loses every group message: followers must find parts in the journal on their own."""

    async def group_send(self, group, message):
        return None

    async def receive(self, channel):
        await asyncio.Event().wait()
