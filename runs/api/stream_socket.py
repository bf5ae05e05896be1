"""`ws/runs/{run_id}/?cursor=`: the resumable stream over a WebSocket, frames ``{"seq", "part"}``.

The follower core (runs.wire.followers) decides everything; the consumer writes frames. Refusals close the socket
with 4000 + the HTTP status the SSE view would answer (4401, 4400, 4404, 4429) after accepting it: a
handshake refused before acceptance reaches a browser as code 1006, indistinguishable from a network drop,
and the client would retry it forever.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from runs.execution.continuation import run_continue
from runs.wire.followers import Follow, FollowRefused, FrameKind, follow_open

__all__ = ["RunStreamConsumer"]

SERVER_ERROR = 1011  # the follow failed in a way the client's reconnect may fix


class RunStreamConsumer(AsyncJsonWebsocketConsumer):
    """Sends the run's parts from the cursor on; the same replay, gap-fill and permission rules as SSE."""

    # No channel of the consumer's own (get_channel_layer answers None for an alias not configured): its
    # follower listens to the run's group, and one layer receive per socket is enough under load.
    channel_layer_alias = None
    follow: Follow | None = None
    task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        await self.accept()
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        user = self.scope.get("user")
        try:
            self.follow = await follow_open(
                run_id=self.scope["url_route"]["kwargs"]["run_id"], cursor=query.get("cursor", [None])[0],
                authenticate=lambda: user, kind="ws", continuation=run_continue,
            )
        except FollowRefused as refusal:
            await self.close(code=refusal.close_code, reason=refusal.detail[:120])
            return
        self.task = asyncio.create_task(self._send_frames(self.follow))

    async def disconnect(self, code: int) -> None:
        if self.task is not None:
            self.task.cancel()
        if self.follow is not None:
            self.follow.close()

    async def receive_json(self, content, **kwargs) -> None:
        return None  # the stream is one-way; verdicts go through the REST API

    async def _send_frames(self, follow: Follow) -> None:
        async for frame in follow.frames():
            if frame.kind is FrameKind.PART:
                # The part's JSON text as it is (shared by every follower of a live part): no encode per socket.
                await self.send(text_data=f'{{"seq":{frame.seq},"part":{frame.json}}}')
            elif frame.kind is FrameKind.DONE:
                await self.send_json({"done": True})
                await self.close()
            elif frame.kind is FrameKind.FAILED:  # redacted; a done frame too unless a reconnect may succeed
                await self.send_json({"seq": None, "part": frame.part})
                if frame.is_final:
                    await self.send_json({"done": True})
                    await self.close()
                else:
                    await self.close(code=SERVER_ERROR)
