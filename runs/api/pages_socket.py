"""Live pages over Channels: `ws/live/?topic=...` tells an open page that what it shows changed, so the page
fetches itself again (static/deuz/live-pages.js). A frame names what changed and nothing more: no tool input,
no token, no other user's data; the fetch goes through the page's own view and permission checks.

Topics (one connection may follow several, ``?topic=approvals&topic=run:r1``):

  approvals    the reviewers' queue and request pages: requests recorded, decided, expired, withdrawn, used
               (needs the permission to decide)
  runs         the run list: a run's status changed (each frame only for a run the user may read)
  run:<id>     one run's pages: its status or its requests changed (the run must be readable); on connect the
               run's current status is sent first, so a page that subscribed late still learns of a change
  thread:<id>  one thread's chat page: a turn's status changed, or a new turn started (the thread must be
               readable)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from approvals.roles import approval_is_decidable_by
from runs.access import VIEW_EVERY_RUN, run_is_readable_by, thread_is_readable_by
from runs.models import Run, Thread
from runs.wire.groups import APPROVALS_GROUP, RUNS_GROUP, run_pages_group, thread_pages_group

__all__ = ["LivePagesConsumer"]

MAX_TOPICS = 4


class LivePagesConsumer(AsyncJsonWebsocketConsumer):
    """Follows the topics of one open page for its signed-in user; refuses what the user may not see (4403 for
    the console without the permission, 4404 for a run the user may not read, as the pages answer)."""

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        if self.user is None or not self.user.is_authenticated or not self.user.is_active:
            await self._refuse(4401)
            return
        topics = parse_qs(self.scope.get("query_string", b"").decode("latin-1")).get("topic", [])
        if not topics or len(topics) > MAX_TOPICS:
            await self._refuse(4400)
            return
        groups, self.run_ids, self.thread_ids = [], [], []
        for topic in topics:
            if topic == "approvals":
                if not await database_sync_to_async(approval_is_decidable_by)(user=self.user):
                    await self._refuse(4403)
                    return
                groups.append(APPROVALS_GROUP)
            elif topic == "runs":
                groups.append(RUNS_GROUP)
            elif topic.startswith("run:") and len(topic) > 4:
                run_id = topic[4:]
                if not await self._may_read(run_id):
                    await self._refuse(4404)
                    return
                groups.append(run_pages_group(run_id))
                self.run_ids.append(run_id)
            elif topic.startswith("thread:") and len(topic) > 7:
                thread_id = topic[7:]
                if not await self._may_read_thread(thread_id):
                    await self._refuse(4404)
                    return
                groups.append(thread_pages_group(thread_id))
                self.thread_ids.append(thread_id)
            else:
                await self._refuse(4400)
                return
        self.sees_every_run = await database_sync_to_async(self.user.has_perm)(VIEW_EVERY_RUN)
        self.groups_joined = groups
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()  # once in its groups: a change right after the handshake is not missed
        for run_id in self.run_ids:
            status = await Run.objects.filter(run_id=run_id).values_list("status", flat=True).afirst()
            await self.send_json({"topic": f"run:{run_id}", "event": "status", "run_id": run_id, "status": status})

    async def _refuse(self, code: int) -> None:
        """Accept, then close with ``code``: a handshake refused before acceptance reaches a browser as 1006,
        indistinguishable from a network drop, and the page would retry it forever."""
        await self.accept()
        await self.close(code=code)

    @database_sync_to_async
    def _may_read(self, run_id: str) -> bool:
        run = Run.objects.filter(run_id=run_id).only("id", "created_by_id").first()
        return run is not None and run_is_readable_by(run, user=self.user)

    @database_sync_to_async
    def _may_read_thread(self, thread_id: str) -> bool:
        thread = Thread.objects.filter(thread_id=thread_id).only("id", "created_by_id").first()
        return thread is not None and thread_is_readable_by(thread, user=self.user)

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        return None  # one-way: pages change things through their forms

    async def live_changed(self, message: dict[str, Any]) -> None:
        """A change in a followed group: passed on as ``{"topic", "event", "run_id", "status"}``."""
        run_id = message.get("run_id")
        if run_id in self.run_ids:
            topic = f"run:{run_id}"
        elif message.get("thread_id") in self.thread_ids:
            topic = f"thread:{message['thread_id']}"
        elif message.get("event") == "approvals":
            topic = "approvals"
        else:
            topic = "runs"
            if not self.sees_every_run and message.get("created_by_id") != self.user.pk:
                return  # another user's run: this user's list does not show it
        await self.send_json({"topic": topic, "event": message.get("event"), "run_id": run_id,
                              "status": message.get("status")})
