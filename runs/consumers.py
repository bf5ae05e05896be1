"""`ws/runs/{run_id}/?cursor=`: the resumable stream over a WebSocket, frames ``{"seq", "part"}``."""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from runs.followers import RunFollower, authenticate_token, follower_id
from runs.runtime.codec import encode_value
from runs.runtime.loops import error_part
from runs.runtime.wire import DONE, IDLE, follow_journal

__all__ = ["RunStreamConsumer"]

logger = logging.getLogger("deuz.followers")


class RunStreamConsumer(AsyncJsonWebsocketConsumer):
    """Sends the run's parts from the cursor on; the same replay, gap-fill and permission rules as SSE."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            headers = dict(self.scope.get("headers") or [])
            user = await authenticate_token(headers.get(b"authorization", b"").decode("latin-1") or None)
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            cursor = int(query.get("cursor", ["-1"])[0])
        except ValueError:
            cursor = -2
        if cursor < -1:
            await self.close(code=4400)
            return
        self.run_id = self.scope["url_route"]["kwargs"]["run_id"]
        await self.accept()
        self.task = asyncio.create_task(self._follow(cursor))

    async def disconnect(self, code: int) -> None:
        task = getattr(self, "task", None)
        if task is not None:
            task.cancel()

    async def receive_json(self, content, **kwargs) -> None:
        return None  # the stream is one-way; verdicts go through the REST API

    async def _follow(self, cursor: int) -> None:
        try:
            async with RunFollower(self.run_id, follower_id=follower_id("ws")) as follower:
                if not await follower.exists():
                    await self.send_json({"seq": None, "part": {"type": "error", "error": {
                        "name": "RunNotFound", "message": f"No run {self.run_id!r}."}}})
                    await self.send_json({"done": True})
                    await self.close()
                    return
                async for item in follow_journal(read=follower.read, state=follower.state, wait=follower.wait,
                                                 continue_run=follower.continue_run, cursor=cursor, yield_idle=True):
                    if item == IDLE:
                        continue
                    if item == DONE:
                        await self.send_json({"done": True})
                        await self.close()
                        return
                    seq, part = item
                    await self.send_json({"seq": seq, "part": encode_value(part)})
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # redacted, and no done frame: the client reconnects from its cursor
            logger.exception("Following run %s over a WebSocket failed.", self.run_id)
            await self.send_json({"seq": None, "part": error_part(exc)})
            await self.close(code=1011)
