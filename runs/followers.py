"""Following a run's journal from a web process: the adapters follow_journal needs, shared by the
Server-Sent Events view and the WebSocket consumer."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone

from runs.journal import run_group_name
from runs.models import Run
from runs.runtime.wire import FollowState, JournalPage
from runs.services import run_claim
from runs.stores.journal import DatabaseStreamStateStore

__all__ = ["RunFollower"]

logger = logging.getLogger("deuz.followers")

# Continuation legs started by followers, kept referenced so they outlive the request that started them.
_continuations: set[asyncio.Task[None]] = set()


class RunFollower:
    """read / state / wait / continue_run for one run, woken by the run's Channels group."""

    def __init__(self, run_id: str, *, follower_id: str) -> None:
        self.run_id = run_id
        self.follower_id = follower_id
        self.journal = DatabaseStreamStateStore()
        self.layer = get_channel_layer()
        self.channel: str | None = None
        self.woken = asyncio.Event()

    async def __aenter__(self) -> RunFollower:
        if self.layer is not None:
            try:
                self.channel = await self.layer.new_channel()
                await self.layer.group_add(run_group_name(self.run_id), self.channel)
            except Exception as exc:  # no live push: the poll still finds every part
                logger.warning("Live push unavailable for %s: %s", self.run_id, type(exc).__name__)
                self.channel = None
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.layer is not None and self.channel is not None:
            try:
                await self.layer.group_discard(run_group_name(self.run_id), self.channel)
            except Exception:  # the group entry expires on its own
                pass

    async def exists(self) -> bool:
        return await Run.objects.filter(run_id=self.run_id).aexists()

    async def read(self, after: int) -> JournalPage:
        return await sync_to_async(self.journal.read_sync)(self.run_id, after, 500)

    async def state(self) -> FollowState:
        row = await Run.objects.filter(run_id=self.run_id).values("status", "lease_expires_at").afirst()
        if row is None:
            return FollowState(is_active=False, is_producer_gone=False)
        is_active = row["status"] in (Run.Status.QUEUED, Run.Status.RUNNING)
        lease = row["lease_expires_at"]
        is_gone = row["status"] == Run.Status.RUNNING and (lease is None or lease < timezone.now())
        return FollowState(is_active=is_active, is_producer_gone=is_gone)

    async def wait(self, seconds: float) -> None:
        """Until a journal notification or ``seconds``; either way the caller reads the journal again."""
        if self.channel is None:
            await asyncio.sleep(seconds)
            return
        try:
            await asyncio.wait_for(self.layer.receive(self.channel), seconds)
        except TimeoutError:
            pass
        except Exception:  # a broken layer: fall back to the poll
            await asyncio.sleep(seconds)

    async def continue_run(self) -> None:
        """Claim the dead run exactly as a worker would (the lease is the one lock) and run its leg here."""
        from runs.worker import Worker

        claims = await sync_to_async(run_claim)(worker_id=self.follower_id, limit=1, run_id=self.run_id)
        if not claims:
            return  # another follower or a worker holds it now
        logger.info("Follower %s continues run %s (epoch %d).", self.follower_id, self.run_id, claims[0].epoch)
        task = asyncio.get_running_loop().create_task(Worker(worker_id=self.follower_id).execute(claims[0]))
        _continuations.add(task)
        task.add_done_callback(_continuations.discard)


def follower_id(kind: str) -> str:
    from runs.worker import worker_id_default

    return f"{worker_id_default()}:{kind}"


async def authenticate_token(header: str | None) -> Any:
    """The user of an ``Authorization: Token KEY`` header, or None."""
    if not header:
        return None
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "token" or not key.strip():
        return None
    from rest_framework.authtoken.models import Token

    token = await Token.objects.select_related("user").filter(key=key.strip()).afirst()
    if token is None or not token.user.is_active:
        return None
    return token.user
